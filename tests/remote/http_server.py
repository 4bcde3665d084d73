#!/usr/bin/python3
"""A loopback HTTP server for mmpack's remote-set tests: serves a directory, stores PUTs, and
fails on purpose.

    http_server.py --root DIR [--sigv4 ACCESS_KEY:SECRET] [--fail GLOB:KIND:COUNT]... [--log FILE]
                   [--put-delay SECONDS --put-peak FILE]

It listens on 127.0.0.1 only, on a port the kernel picks, and prints that port on its first
line of stdout. URLs map onto DIR (path style: /bucket/key is DIR/bucket/key). GET and HEAD
serve files, PUT stores its body (written to a temporary name, then renamed), DELETE removes.

--fail GLOB:KIND:COUNT: the first COUNT requests (or "always") whose path matches GLOB
(fnmatch) fail with KIND:
    die      the status line, the headers and half the body, then the connection closes
    corrupt  the whole body with one byte in its middle inverted
    stall    the status line, the headers and 1 KiB of body, then nothing for 20 s, then close
    NNN      that HTTP status (e.g. 503, 500, 404), with an S3-style XML error body

--sigv4 ACCESS_KEY:SECRET: every request must carry an AWS Signature Version 4 Authorization
header made with that secret (the algorithm of AWS's "Signature Version 4 signing process":
canonical request, string to sign, HMAC chain over date, region, service, "aws4_request"),
its x-amz-content-sha256 must be the SHA-256 of the body (or UNSIGNED-PAYLOAD), and its
x-amz-date within 15 minutes; otherwise 403 with S3's error codes (InvalidAccessKeyId,
SignatureDoesNotMatch, XAmzContentSHA256Mismatch, RequestTimeTooSkewed). s3rver, the S3
server the other tests use, does not verify V4 signatures; this does.

--log FILE: one line per request, "METHOD PATH STATUS KIND", for tests that count requests.

--put-delay SECONDS: every PUT is held that long before it is stored, so that a client's
concurrent PUTs overlap here; --put-peak FILE: the most PUTs ever in progress at once, rewritten
whenever it grows (for tests of parallel uploads).
"""
import argparse
import datetime
import fnmatch
import hashlib
import hmac
import http.server
import os
import sys
import threading
import time
import urllib.parse


def canonical_request(method, path, query, headers, signed, payload_hash):
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    enc = lambda s: urllib.parse.quote(s, safe='-_.~')
    canonical_query = '&'.join(f'{enc(k)}={enc(v)}' for k, v in sorted(pairs))
    canonical_headers = ''.join(f'{h}:{" ".join(headers.get(h, "").split())}\n' for h in signed)
    return '\n'.join([method, path, canonical_query, canonical_headers, ';'.join(signed),
                      payload_hash])


def signature(secret, date, region, service, creq, amz_date):
    scope = f'{date}/{region}/{service}/aws4_request'
    to_sign = '\n'.join(['AWS4-HMAC-SHA256', amz_date, scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
    key = ('AWS4' + secret).encode()
    for part in (date, region, service, 'aws4_request'):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


class Rules:
    def __init__(self, specs):
        self.lock = threading.Lock()
        self.rules = []
        for spec in specs:
            glob, kind, count = spec.rsplit(':', 2)
            self.rules.append([glob, kind, None if count == 'always' else int(count)])

    def take(self, path):
        with self.lock:
            for rule in self.rules:
                glob, kind, left = rule
                if fnmatch.fnmatch(path, glob) and (left is None or left > 0):
                    if left is not None:
                        rule[2] -= 1
                    return kind
        return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'mmpack-test-http/1'

    def log_message(self, *args):
        pass

    def record(self, status, kind=''):
        """Logs the request. Called before its response is sent: a client that has its answer
        (and a test that then reads the log) always finds the line."""
        if self.server.log_path:
            with self.server.log_lock, open(self.server.log_path, 'a') as f:
                f.write(f'{self.command} {self.path} {status} {kind}\n')

    def local_path(self):
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        full = os.path.normpath(os.path.join(self.server.root, path.lstrip('/')))
        if not (full + os.sep).startswith(self.server.root + os.sep):
            return None
        return full

    def error(self, status, code, message, kind=''):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f'<Message>{message}</Message></Error>').encode()
        self.record(status, kind)
        self.send_response(status)
        self.send_header('Content-Type', 'application/xml')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def read_body(self):
        length = int(self.headers.get('Content-Length', '0'))
        return self.rfile.read(length) if length > 0 else b''

    def check_signature(self, body):
        """None when the request is signed right, else (code, message)."""
        key_id, secret = self.server.sigv4
        auth = self.headers.get('Authorization', '')
        if not auth.startswith('AWS4-HMAC-SHA256 '):
            return 'AccessDenied', 'no AWS Signature Version 4 Authorization header'
        try:
            parts = dict(p.strip().split('=', 1) for p in auth[len('AWS4-HMAC-SHA256 '):].split(','))
            credential = parts['Credential'].split('/')
            signed = parts['SignedHeaders'].split(';')
            provided = parts['Signature']
        except (KeyError, ValueError):
            return 'AuthorizationHeaderMalformed', 'malformed Authorization header'
        if credential[0] != key_id:
            return 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist.'
        headers = {k.lower(): v for k, v in self.headers.items()}
        for required in ('host', 'x-amz-date', 'x-amz-content-sha256'):
            if required not in signed:
                return 'AccessDenied', f'{required} is not signed'
        payload = headers.get('x-amz-content-sha256', '')
        if payload != 'UNSIGNED-PAYLOAD' and payload != hashlib.sha256(body).hexdigest():
            return 'XAmzContentSHA256Mismatch', 'x-amz-content-sha256 is not the body\'s SHA-256'
        amz_date = headers.get('x-amz-date', '')
        try:
            when = datetime.datetime.strptime(amz_date, '%Y%m%dT%H%M%SZ').replace(
                tzinfo=datetime.timezone.utc)
        except ValueError:
            return 'AccessDenied', 'bad x-amz-date'
        if abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) > 900:
            return 'RequestTimeTooSkewed', 'x-amz-date is more than 15 minutes off'
        split = urllib.parse.urlsplit(self.path)
        creq = canonical_request(self.command, split.path, split.query, headers, signed, payload)
        expected = signature(secret, credential[1], credential[2], credential[3], creq, amz_date)
        if not hmac.compare_digest(expected, provided):
            return 'SignatureDoesNotMatch', 'The request signature we calculated does not match.'
        return None

    def handle_any(self):
        body = self.read_body() if self.command == 'PUT' else b''
        if self.server.sigv4:
            problem = self.check_signature(body)
            if problem:
                return self.error(403, problem[0], problem[1])
        kind = self.server.rules.take(urllib.parse.urlsplit(self.path).path)
        if kind and kind.isdigit():
            return self.error(int(kind), 'InjectedError', f'injected HTTP {kind}', kind)
        path = self.local_path()
        if path is None:
            return self.error(403, 'AccessDenied', 'outside the root')
        if self.command == 'PUT':
            return self.put(path, body)
        if self.command == 'DELETE':
            if os.path.isfile(path):
                os.unlink(path)
            self.record(204)
            self.send_response(204)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return None
        if not os.path.isfile(path):
            return self.error(404, 'NoSuchKey', 'The specified key does not exist.')
        with open(path, 'rb') as f:
            data = f.read()
        self.send(data, kind)

    def put(self, path, body):
        server = self.server
        with server.put_lock:
            server.puts_in_progress += 1
            if server.puts_in_progress > server.put_peak:
                server.put_peak = server.puts_in_progress
                if server.put_peak_path:
                    with open(server.put_peak_path, 'w') as f:
                        f.write('%d\n' % server.put_peak)
        try:
            time.sleep(server.put_delay)
            self.store(path, body)
        finally:
            with server.put_lock:
                server.puts_in_progress -= 1

    def store(self, path, body):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f'{path}.put-{threading.get_ident()}'
        with open(temp, 'wb') as f:
            f.write(body)
        os.replace(temp, path)
        self.record(200)
        self.send_response(200)
        self.send_header('ETag', '"' + hashlib.md5(body).hexdigest() + '"')
        self.send_header('Content-Length', '0')
        self.end_headers()

    def send(self, data, kind):
        if kind == 'corrupt' and data:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
        self.record(200, kind or '')
        self.send_response(200)
        self.send_header('Content-Length', str(len(data)))
        self.send_header('Content-Type', 'application/octet-stream')
        self.end_headers()
        if self.command == 'HEAD':
            return
        if kind == 'die':
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if kind == 'stall':
            self.wfile.write(data[:1024])
            self.wfile.flush()
            time.sleep(20)
            self.close_connection = True
            return
        self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_DELETE = handle_any


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--root', required=True)
    parser.add_argument('--sigv4', default='')
    parser.add_argument('--fail', action='append', default=[])
    parser.add_argument('--log', default='')
    parser.add_argument('--put-delay', type=float, default=0.0)
    parser.add_argument('--put-peak', default='')
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    server.root = os.path.realpath(args.root)
    server.rules = Rules(args.fail)
    server.sigv4 = tuple(args.sigv4.split(':', 1)) if args.sigv4 else None
    server.log_path = args.log
    server.log_lock = threading.Lock()
    server.put_delay, server.put_peak_path = args.put_delay, args.put_peak
    server.put_lock, server.puts_in_progress, server.put_peak = threading.Lock(), 0, 0
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    sys.exit(main())
