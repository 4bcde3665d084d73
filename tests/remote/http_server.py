#!/usr/bin/python3
"""A loopback HTTP server for mmpack's remote-set tests: serves a directory, stores PUTs, and
fails on purpose.

    http_server.py --root DIR [--sigv4 ACCESS_KEY:SECRET]... [--sigv4-issued FILE]
                   [--fail GLOB:KIND:COUNT]... [--delay GLOB:SECONDS]... [--log FILE]
                   [--put-delay SECONDS --put-peak FILE] [--bearer TOKEN] [--hf]

It listens on 127.0.0.1 only, on a port the kernel picks, and prints that port on its first
line of stdout. URLs map onto DIR (path style: /bucket/key is DIR/bucket/key). GET and HEAD
serve files (a GET with "Range: bytes=A-B" gets 206 and those bytes, unless --no-ranges: then
the whole file, as a server without range support), PUT stores its body (written to a temporary name, then renamed), DELETE removes.

--fail GLOB:KIND:COUNT: the first COUNT requests (or "always") whose path matches GLOB
(fnmatch; "METHOD GLOB", e.g. "PUT */a.h5", counts only that method's requests) fail with KIND:
    die      the status line, the headers and half the body, then the connection closes
    corrupt  the whole body with one byte in its middle inverted
    stall    the status line, the headers and 1 KiB of body, then nothing for 20 s, then close
    NNN      that HTTP status (e.g. 503, 500, 404), with an S3-style XML error body

--sigv4 ACCESS_KEY:SECRET (repeatable): every request must carry an AWS Signature Version 4
Authorization header made with the secret of one of these keys (the algorithm of AWS's "Signature Version 4 signing process":
canonical request, string to sign, HMAC chain over date, region, service, "aws4_request"),
its x-amz-content-sha256 must be the SHA-256 of the body (or UNSIGNED-PAYLOAD), and its
x-amz-date within 15 minutes; otherwise 403 with S3's error codes (InvalidAccessKeyId,
SignatureDoesNotMatch, XAmzContentSHA256Mismatch, RequestTimeTooSkewed). s3rver, the S3
server the other tests use, does not verify V4 signatures; this does. The query string is part
of the canonical request (names sorted, values encoded), as S3 computes it.

--sigv4-issued FILE: also accepts the temporary credentials listed in FILE (JSON lines {"key",
"secret", "token", "expires"}: tests/remote/aws_identity_server.py writes them), read again at
each request; such a request must carry the key's token as x-amz-security-token (else 403
InvalidToken) and come before it expires (else 400 ExpiredToken, as S3 answers).

As S3 does, PUT stores the request's x-amz-meta-* headers with the object and GET and HEAD
return them, with an ETag (the MD5 of the bytes, quoted). S3's multipart upload is served
(POST ?uploads, PUT ?partNumber=N&uploadId=U, POST ?uploadId=U with the parts' XML,
DELETE ?uploadId=U), the metadata of the initiating POST kept for the object.

--delay GLOB:SECONDS: requests whose path matches GLOB are held that long before their answer
(a slow store, for tests of progress lines and of credentials that expire during a read).

--bearer TOKEN: every request must carry "Authorization: Bearer TOKEN" (else 401), except those
of /cdn/ (see --hf), which must carry no Authorization at all (else 400: a token leaked to
another host).

--hf: the Hugging Face Hub's layout. GET/HEAD /datasets/ORG/NAME/resolve/REV/PATH serves
ROOT/datasets/ORG/NAME/REV/PATH (REV percent-decoded: refs%2Fpr%2F1 is the folder refs/pr/1):
small files directly, *.h5 files (the Hub's LFS files) with a 302 redirect to
http://localhost:PORT/cdn/... (another host name than 127.0.0.1, as the Hub redirects to its
CDN), served from there. Any other path is 404 with the Hub's "Entry not found".

--gcs: GET and HEAD return the stored x-amz-meta-* headers as x-goog-meta-*, as GCS's XML API
does.

--log FILE: one line per request, "METHOD PATH STATUS KIND", and " key=ID" when it was signed
(the access key id), for tests that count requests.

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
import json
import os
import re
import secrets
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

    def take(self, path, method=''):
        with self.lock:
            for rule in self.rules:
                glob, kind, left = rule
                only = ''
                if ' ' in glob:  # "PUT */x.h5": that method only
                    only, glob = glob.split(' ', 1)
                if only and only != method:
                    continue
                if fnmatch.fnmatch(path, glob) and (left is None or left > 0):
                    if left is not None:
                        rule[2] -= 1
                    return kind
        return None


def issued_credentials(path):
    """key -> {"secret", "token", "expires"} of aws_identity_server.py's --issued file."""
    creds = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    c = json.loads(line)
                    creds[c['key']] = c
    return creds


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'mmpack-test-http/1'

    def log_message(self, *args):
        pass

    def record(self, status, kind=''):
        """Logs the request. Called before its response is sent: a client that has its answer
        (and a test that then reads the log) always finds the line."""
        if self.server.log_path:
            key = getattr(self, 'signed_by', '')
            with self.server.log_lock, open(self.server.log_path, 'a') as f:
                f.write(f'{self.command} {self.path} {status} {kind}' +
                        (f' key={key}' if key else '') + '\n')

    def local_path(self, path=None):
        if path is None:
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
        headers = {k.lower(): v for k, v in self.headers.items()}
        key_id = credential[0]
        secret = self.server.sigv4.get(key_id)
        if secret is None:
            issued = issued_credentials(self.server.sigv4_issued).get(key_id)
            if issued is None:
                return 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist.'
            if headers.get('x-amz-security-token', '') != issued['token']:
                return 'InvalidToken', 'The provided token is malformed or otherwise invalid.'
            if time.time() >= issued['expires']:
                return 'ExpiredToken', 'The provided token has expired.'
            secret = issued['secret']
            if 'x-amz-security-token' not in signed:
                return 'AccessDenied', 'x-amz-security-token is not signed'
        self.signed_by = key_id
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
        body = self.read_body() if self.command in ('PUT', 'POST') else b''
        self.signed_by = ''
        if self.server.sigv4 or self.server.sigv4_issued:
            problem = self.check_signature(body)
            if problem:
                status = 400 if problem[0] == 'ExpiredToken' else 403
                return self.error(status, problem[0], problem[1])
        split = urllib.parse.urlsplit(self.path)
        if self.server.bearer is not None:
            auth = self.headers.get('Authorization')
            if split.path.startswith('/cdn/'):
                if auth is not None:
                    return self.error(400, 'TokenLeaked', 'an Authorization header reached the CDN')
            elif auth != 'Bearer ' + self.server.bearer:
                return self.error(401, 'Unauthorized', 'no or wrong bearer token')
        for glob, seconds in self.server.delays:
            if fnmatch.fnmatch(split.path, glob):
                time.sleep(seconds)
        kind = self.server.rules.take(split.path, self.command)
        if kind and kind.isdigit():
            return self.error(int(kind), 'InjectedError', f'injected HTTP {kind}', kind)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        if self.server.hf and not split.path.startswith('/cdn/'):
            return self.hub(split.path, kind)
        if self.server.hf:  # /cdn/REL: the file REL of the root (hub() redirects there)
            path = self.local_path(urllib.parse.unquote(split.path[len('/cdn'):]))
        else:
            path = self.local_path()
        if path is None:
            return self.error(403, 'AccessDenied', 'outside the root')
        if 'uploads' in query or 'uploadId' in query:
            return self.multipart(path, query, body)
        if self.command == 'PUT':
            return self.put(path, body)
        if self.command == 'DELETE':
            if os.path.isfile(path):
                os.unlink(path)
            with self.server.meta_lock:
                self.server.meta.pop(path, None)
            self.record(204)
            self.send_response(204)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return None
        if not os.path.isfile(path):
            return self.error(404, 'NoSuchKey', 'The specified key does not exist.')
        with open(path, 'rb') as f:
            data = f.read()
        self.send(data, kind, path)

    def hub(self, path, kind):
        """--hf: /datasets/ORG/NAME/resolve/REV/PATH (see the module's docstring)."""
        m = re.match(r'^/datasets/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$', path)
        if not m or self.command not in ('GET', 'HEAD'):
            return self.error(404, 'EntryNotFound', 'Entry not found')
        org, name, rev, rest = m.groups()
        rel = os.path.join('datasets', org, name, urllib.parse.unquote(rev),
                           urllib.parse.unquote(rest))
        local = self.local_path('/' + rel)
        if local is None or not os.path.isfile(local):
            return self.error(404, 'EntryNotFound', 'Entry not found')
        if local.endswith('.h5'):
            port = self.server.server_address[1]
            target = f'http://localhost:{port}/cdn/{urllib.parse.quote(rel)}?X-Signed=1'
            self.record(302, kind or '')
            self.send_response(302)
            self.send_header('Location', target)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return None
        with open(local, 'rb') as f:
            data = f.read()
        self.send(data, kind, local)

    def multipart(self, path, query, body):
        """S3's multipart upload (see the module's docstring)."""
        server = self.server
        if self.command == 'POST' and 'uploads' in query:
            upload_id = secrets.token_hex(8)
            meta = {k.lower(): v for k, v in self.headers.items()
                    if k.lower().startswith('x-amz-meta-')}
            with server.meta_lock:
                server.uploads[upload_id] = {'path': path, 'meta': meta, 'parts': {}}
            xml = ('<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                   f'<Bucket>b</Bucket><Key>k</Key><UploadId>{upload_id}</UploadId>'
                   '</InitiateMultipartUploadResult>').encode()
            return self.reply(200, xml, 'application/xml')
        upload_id = query.get('uploadId', '')
        with server.meta_lock:
            upload = server.uploads.get(upload_id)
        if upload is None or upload['path'] != path:
            return self.error(404, 'NoSuchUpload', 'The specified upload does not exist.')
        if self.command == 'PUT':
            number = int(query.get('partNumber', '0'))
            if not 1 <= number <= 10000:
                return self.error(400, 'InvalidArgument', 'partNumber')
            etag = '"' + hashlib.md5(body).hexdigest() + '"'
            with server.meta_lock:
                upload['parts'][number] = (etag, body)
            return self.reply(200, b'', extra={'ETag': etag})
        if self.command == 'DELETE':
            with server.meta_lock:
                server.uploads.pop(upload_id, None)
            return self.reply(204, b'')
        if self.command == 'POST':
            listed = re.findall(r'<PartNumber>(\d+)</PartNumber>\s*<ETag>([^<]+)</ETag>',
                                body.decode())
            data = b''
            for i, (number, etag) in enumerate(listed):
                part = upload['parts'].get(int(number))
                if int(number) != i + 1 or part is None or part[0] != etag.replace('&quot;', '"'):
                    return self.error(400, 'InvalidPart', f'part {number} ({etag})')
                data += part[1]
            if not listed:
                return self.error(400, 'MalformedXML', 'no parts')
            with server.meta_lock:
                server.uploads.pop(upload_id, None)
            self.store_object(path, data, upload['meta'])
            xml = ('<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
                   f'<ETag>"{hashlib.md5(data).hexdigest()}-{len(listed)}"</ETag>'
                   '</CompleteMultipartUploadResult>').encode()
            return self.reply(200, xml, 'application/xml')
        return self.error(405, 'MethodNotAllowed', self.command)

    def reply(self, status, data, content_type='application/octet-stream', extra=None):
        self.record(status)
        self.send_response(status)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(data)
        return None

    def store_object(self, path, body, meta):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f'{path}.put-{threading.get_ident()}'
        with open(temp, 'wb') as f:
            f.write(body)
        os.replace(temp, path)
        with self.server.meta_lock:
            self.server.meta[path] = meta

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
        meta = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith('x-amz-meta-')}
        self.store_object(path, body, meta)
        self.record(200)
        self.send_response(200)
        self.send_header('ETag', '"' + hashlib.md5(body).hexdigest() + '"')
        self.send_header('Content-Length', '0')
        self.end_headers()

    def send(self, data, kind, path):
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        with self.server.meta_lock:
            meta = dict(self.server.meta.get(path, {}))
        if kind == 'corrupt' and data:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
        status, content_range = 200, None
        asked = self.headers.get('Range')  # RFC 9110 14.2: one "bytes=FIRST-[LAST]" range
        match = re.match(r'bytes=(\d+)-(\d*)$', asked or '')
        if self.command == 'GET' and match and not self.server.no_ranges:
            first = int(match.group(1))
            last = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
            if first >= len(data):
                self.record(416)
                self.send_response(416)
                self.send_header('Content-Range', 'bytes */%d' % len(data))
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            status, content_range = 206, 'bytes %d-%d/%d' % (first, last, len(data))
            data = data[first:last + 1]
        self.record(status, kind or '')
        self.send_response(status)
        if content_range:
            self.send_header('Content-Range', content_range)
        self.send_header('ETag', etag)
        for k, v in meta.items():
            if self.server.gcs:  # GCS's XML API answers custom metadata as x-goog-meta-*
                k = 'x-goog-meta-' + k[len('x-amz-meta-'):]
            self.send_header(k, v)
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

    do_GET = do_HEAD = do_PUT = do_DELETE = do_POST = handle_any


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--root', required=True)
    parser.add_argument('--sigv4', action='append', default=[])
    parser.add_argument('--sigv4-issued', default='')
    parser.add_argument('--fail', action='append', default=[])
    parser.add_argument('--delay', action='append', default=[])
    parser.add_argument('--bearer', default=None)
    parser.add_argument('--hf', action='store_true')
    parser.add_argument('--gcs', action='store_true')
    parser.add_argument('--log', default='')
    parser.add_argument('--put-delay', type=float, default=0.0)
    parser.add_argument('--put-peak', default='')
    parser.add_argument('--no-ranges', action='store_true')
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    server.root = os.path.realpath(args.root)
    server.rules = Rules(args.fail)
    server.sigv4 = dict(k.split(':', 1) for k in args.sigv4)
    server.sigv4_issued = args.sigv4_issued
    server.delays = [(d.rsplit(':', 1)[0], float(d.rsplit(':', 1)[1])) for d in args.delay]
    server.bearer, server.hf, server.gcs = args.bearer, args.hf, args.gcs
    server.meta, server.uploads, server.meta_lock = {}, {}, threading.Lock()
    server.log_path = args.log
    server.log_lock = threading.Lock()
    server.put_delay, server.put_peak_path = args.put_delay, args.put_peak
    server.no_ranges = args.no_ranges
    server.put_lock, server.puts_in_progress, server.put_peak = threading.Lock(), 0, 0
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    sys.exit(main())
