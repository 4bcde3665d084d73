#!/usr/bin/python3
"""A loopback stand-in for AWS's two credential services, for mmpack's credential-chain tests:
the EC2 instance metadata service (IMDSv2) and STS AssumeRoleWithWebIdentity. It checks every
request it gets the way the real services do and issues temporary credentials.

    aws_identity_server.py --issued FILE [--lifetime SECONDS] [--role NAME]
                           [--role-arn ARN --web-identity-token TOKEN [--session-name NAME]]
                           [--log FILE]

It listens on 127.0.0.1 only, on a port the kernel picks, and prints that port on its first
line of stdout.

IMDSv2 (AWS's "Use IMDSv2"):
    PUT /latest/api/token            needs X-aws-ec2-metadata-token-ttl-seconds in 1..21600
                                     (else 400); answers a fresh session token
    GET /latest/meta-data/iam/security-credentials/        needs X-aws-ec2-metadata-token of a
                                     token it issued (else 401); answers --role
    GET /latest/meta-data/iam/security-credentials/ROLE    the same; answers the credentials JSON
                                     (404 for another role)
Container credentials (ECS tasks, EKS Pod Identity): GET /container/credentials with
Authorization equal to --container-token (else 401); answers {"AccessKeyId", "SecretAccessKey",
"Token", "Expiration"} with key ids "ECS-N".
STS (POST /, form body, unsigned): Action=AssumeRoleWithWebIdentity, Version=2011-06-15, RoleArn
--role-arn, WebIdentityToken --web-identity-token and a RoleSessionName (also --session-name
when given), else 400/403 with STS's ErrorResponse XML (InvalidIdentityToken, AccessDenied,
ValidationError); answers the AssumeRoleWithWebIdentityResponse XML.

Issued credentials: key ids "IMDS-N" and "STS-N" (N counts from 1), each valid --lifetime
seconds (default 3600), each appended to --issued as one JSON line {"key", "secret", "token",
"expires" (Unix seconds)}: tests/remote/http_server.py --sigv4-issued FILE accepts them until
they expire, as S3 would. --log: one line per request, "METHOD PATH STATUS WHAT".
"""
import argparse
import datetime
import http.server
import json
import secrets
import sys
import threading
import time
import urllib.parse


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'mmpack-test-identity/1'

    def log_message(self, *args):
        pass

    def record(self, status, what=''):
        if self.server.log_path:
            with self.server.lock, open(self.server.log_path, 'a') as f:
                f.write(f'{self.command} {self.path} {status} {what}\n')

    def answer(self, status, body, content_type='text/plain', what=''):
        data = body.encode()
        self.record(status, what)
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def issue(self, prefix):
        server = self.server
        with server.lock:
            server.counter[prefix] = server.counter.get(prefix, 0) + 1
            key = '%s-%d' % (prefix, server.counter[prefix])
            cred = {'key': key, 'secret': secrets.token_hex(20), 'token': secrets.token_hex(300),
                    'expires': time.time() + server.lifetime}
            with open(server.issued_path, 'a') as f:
                f.write(json.dumps(cred) + '\n')
        return cred

    # --- IMDSv2
    def do_PUT(self):
        if self.path != '/latest/api/token':
            return self.answer(404, 'not found')
        ttl = self.headers.get('X-aws-ec2-metadata-token-ttl-seconds', '')
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self.answer(400, 'X-aws-ec2-metadata-token-ttl-seconds missing or out of range')
        token = secrets.token_hex(16)
        with self.server.lock:
            self.server.tokens.add(token)
        self.answer(200, token, what='token')

    def do_GET(self):
        if self.path == '/container/credentials':
            return self.container()
        base = '/latest/meta-data/iam/security-credentials/'
        if not self.path.startswith(base):
            return self.answer(404, 'not found')
        token = self.headers.get('X-aws-ec2-metadata-token', '')
        with self.server.lock:
            known = token in self.server.tokens
        if not known:
            return self.answer(401, 'no valid X-aws-ec2-metadata-token (IMDSv2)')
        role = self.path[len(base):]
        if role == '':
            return self.answer(200, self.server.role, what='role')
        if role != self.server.role:
            return self.answer(404, 'no such role')
        cred = self.issue('IMDS')
        body = json.dumps({'Code': 'Success', 'LastUpdated': iso(time.time()), 'Type': 'AWS-HMAC',
                           'AccessKeyId': cred['key'], 'SecretAccessKey': cred['secret'],
                           'Token': cred['token'], 'Expiration': iso(cred['expires'])})
        self.answer(200, body, 'application/json', what=cred['key'])

    # --- ECS / EKS Pod Identity container credentials
    def container(self):
        if self.headers.get('Authorization', '') != self.server.container_token:
            return self.answer(401, 'no or wrong Authorization', what='unauthorized')
        cred = self.issue('ECS')
        body = json.dumps({'AccessKeyId': cred['key'], 'SecretAccessKey': cred['secret'],
                           'Token': cred['token'], 'Expiration': iso(cred['expires'])})
        self.answer(200, body, 'application/json', what=cred['key'])

    # --- STS
    def sts_error(self, status, code, message):
        body = ('<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
                f'<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>'
                '</ErrorResponse>')
        self.answer(status, body, 'text/xml', what=code)

    def do_POST(self):
        length = int(self.headers.get('Content-Length', '0'))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode(), keep_blank_values=True))
        if self.path != '/' or 'Authorization' in self.headers:
            return self.sts_error(400, 'InvalidRequest', 'expected an unsigned POST /')
        if self.headers.get('Content-Type', '') != 'application/x-www-form-urlencoded':
            return self.sts_error(400, 'InvalidRequest', 'not a form body')
        if form.get('Action') != 'AssumeRoleWithWebIdentity' or form.get('Version') != '2011-06-15':
            return self.sts_error(400, 'InvalidAction', 'Action or Version')
        if not form.get('RoleSessionName') or (self.server.session_name and
                                               form['RoleSessionName'] != self.server.session_name):
            return self.sts_error(400, 'ValidationError', 'RoleSessionName: ' +
                                  form.get('RoleSessionName', ''))
        if form.get('RoleArn') != self.server.role_arn:
            return self.sts_error(403, 'AccessDenied', 'Not authorized to perform '
                                  'sts:AssumeRoleWithWebIdentity for ' + form.get('RoleArn', ''))
        if form.get('WebIdentityToken') != self.server.web_identity_token:
            return self.sts_error(400, 'InvalidIdentityToken', 'token not valid')
        cred = self.issue('STS')
        body = ('<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/'
                '2011-06-15/"><AssumeRoleWithWebIdentityResult><Credentials>'
                f'<SessionToken>{cred["token"]}</SessionToken>'
                f'<SecretAccessKey>{cred["secret"]}</SecretAccessKey>'
                f'<Expiration>{iso(cred["expires"])}</Expiration>'
                f'<AccessKeyId>{cred["key"]}</AccessKeyId></Credentials>'
                f'<SubjectFromWebIdentityToken>system:serviceaccount:ns:sa'
                '</SubjectFromWebIdentityToken></AssumeRoleWithWebIdentityResult>'
                '</AssumeRoleWithWebIdentityResponse>')
        self.answer(200, body, 'text/xml', what=cred['key'] + ' ' + form['RoleSessionName'])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--issued', required=True)
    parser.add_argument('--lifetime', type=float, default=3600)
    parser.add_argument('--role', default='mmpack-test-role')
    parser.add_argument('--role-arn', default='')
    parser.add_argument('--web-identity-token', default='')
    parser.add_argument('--session-name', default='')
    parser.add_argument('--container-token', default='')
    parser.add_argument('--log', default='')
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.tokens, server.counter = set(), {}
    server.issued_path, server.lifetime, server.role = args.issued, args.lifetime, args.role
    server.role_arn, server.web_identity_token = args.role_arn, args.web_identity_token
    server.session_name, server.log_path = args.session_name, args.log
    server.container_token = args.container_token
    open(args.issued, 'a').close()
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    sys.exit(main())
