#!/usr/bin/env python3
"""Interoperability of IdentityJWKS's remote key sets with PyJWT, over HTTP on 127.0.0.1.

    python3 Integrations/IdentityJWKS/scripts/jwks-interop.py PATH/TO/identity-harness PATH/TO/identity-jwks-check

1. Ours to PyJWT: identity-harness signs a token and writes the JWKS of its key; this script serves that JWKS
   with http.server and PyJWT's PyJWKClient fetches it and verifies the token (signature, issuer, audience).
2. PyJWT's to ours: a JWKS Python wrote (OKPAlgorithm.to_jwk, Ed25519) is served; identity-jwks-check fetches it
   with RemoteKeySet and verifies PyJWT's tokens: a good one is accepted, an unknown kid, a token signed with
   another key and an expired one are refused with their codes; a served JWKS holding a private key is refused
   as a whole and then every token is refused (no key set, deny by default).
The server listens on 127.0.0.1 only, on a free port, and is stopped before the script exits.
Prints one line per check and 'N passed, N failed'; exits 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Not in Python's standard library: .ci/lib.sh's step_pyjwt installs them from PyPI before this runs.
try:
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jwt.algorithms import OKPAlgorithm
except ImportError as error:
    sys.exit(f"{error}: this check needs PyJWT and cryptography: "
             'python3 -m pip install "pyjwt>=2.8" "cryptography>=41"')

HARNESS = sys.argv[1] if len(sys.argv) > 1 else ".build/debug/identity-harness"
CHECK = sys.argv[2] if len(sys.argv) > 2 else ".build-integrations/debug/identity-jwks-check"
ISSUER, AUDIENCE = "frontend", "documents"
results = []
documents = {}  # path -> JWKS text
requests = []   # paths asked for


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(("PASS " if condition else "FAIL ") + name + (f": {detail}" if detail and not condition else ""))


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        requests.append(self.path)
        body = documents.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/jwk-set+json")
        self.send_header("Cache-Control", "max-age=300")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *arguments):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
thread = threading.Thread(target=server.serve_forever, daemon=True)
thread.start()
base = f"http://127.0.0.1:{server.server_address[1]}"


def claims(**overrides):
    now = int(time.time())
    values = {"sub": "alice@contoso.com", "tid": "contoso.com", "iss": ISSUER, "aud": AUDIENCE,
              "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    values.update(overrides)
    return values


def swift_check(path, tokens):
    """identity-jwks-check fetching base+path, verifying `tokens`: (answer lines, standard error)."""
    process = subprocess.run(
        [CHECK, "--url", base + path, "--issuer", ISSUER, "--audience", AUDIENCE, "--timeout", "10",
         "--allow-loopback-http", "yes"],
        input="\n".join(tokens) + "\n", capture_output=True, text=True, timeout=60)
    return process.stdout.strip().splitlines(), process.stderr.strip()


try:
    # 1. Ours to PyJWT: the harness signs and writes its JWKS; PyJWKClient fetches it over HTTP.
    keygen = subprocess.run([HARNESS, "assertion", "keygen"], capture_output=True, text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory() as folder:
        jwks_path = os.path.join(folder, "jwks.json")
        token = subprocess.run(
            [HARNESS, "assertion", "sign", "--private-key", keygen[1], "--kid", "sw-2026-11", "--issuer", ISSUER,
             "--audience", AUDIENCE, "--account", "bob@fabrikam.com", "--tenant", "fabrikam.com",
             "--jwks-out", jwks_path], capture_output=True, text=True, check=True).stdout.strip()
        with open(jwks_path) as file:
            documents["/swift/jwks.json"] = file.read()
    try:
        client = jwt.PyJWKClient(base + "/swift/jwks.json")
        signing_key = client.get_signing_key_from_jwt(token)
        decoded = jwt.decode(token, signing_key.key, algorithms=["EdDSA"], audience=AUDIENCE, issuer=ISSUER)
        check("PyJWKClient fetches our JWKS and verifies our token",
              decoded["sub"] == "bob@fabrikam.com" and decoded["tid"] == "fabrikam.com"
              and signing_key.key_id == "sw-2026-11", decoded)
    except jwt.PyJWTError as error:
        check("PyJWKClient fetches our JWKS and verifies our token", False, repr(error))
    check("PyJWKClient asked our endpoint", "/swift/jwks.json" in requests, requests)
    try:
        jwt.PyJWKClient(base + "/swift/jwks.json").get_signing_key("another-kid")
        check("PyJWKClient finds no key for an unknown kid in our JWKS", False)
    except jwt.PyJWKClientError:
        check("PyJWKClient finds no key for an unknown kid in our JWKS", True)

    # 2. PyJWT's to ours: a JWKS Python wrote, fetched by RemoteKeySet.
    python_key = Ed25519PrivateKey.generate()
    other_key = Ed25519PrivateKey.generate()
    jwk = json.loads(OKPAlgorithm.to_jwk(python_key.public_key()))
    jwk.update({"kid": "py-2026-11", "use": "sig", "alg": "EdDSA"})
    documents["/python/jwks.json"] = json.dumps({"keys": [jwk]})
    headers = {"kid": "py-2026-11"}
    tokens = [
        jwt.encode(claims(), python_key, algorithm="EdDSA", headers=headers),
        jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py-unknown"}),
        jwt.encode(claims(), other_key, algorithm="EdDSA", headers=headers),
        jwt.encode(claims(iat=int(time.time()) - 3600, exp=int(time.time()) - 600), python_key, algorithm="EdDSA",
                   headers=headers),
    ]
    before = len(requests)
    answers, errors = swift_check("/python/jwks.json", tokens)
    check("RemoteKeySet fetches PyJWT's JWKS and verifies PyJWT's token",
          answers[:1] == ['accepted "alice@contoso.com" "contoso.com"'], (answers, errors))
    check("RemoteKeySet refuses an unknown kid with code 4", len(answers) > 1 and answers[1].startswith("refused 4 "), answers)
    check("RemoteKeySet refuses another key's signature with code 5",
          len(answers) > 2 and answers[2].startswith("refused 5 "), answers)
    check("RemoteKeySet refuses an expired token with code 6", len(answers) > 3 and answers[3].startswith("refused 6 "), answers)
    # One fetch at start, one for the unknown kid (rate limited after that).
    check("identity-jwks-check asked the endpoint twice", len(requests) - before == 2, requests[before:])

    private = dict(jwk)
    private["d"] = json.loads(OKPAlgorithm.to_jwk(python_key))["d"]
    documents["/python/private.json"] = json.dumps({"keys": [private]})
    answers, errors = swift_check("/python/private.json", tokens[:1])
    check("RemoteKeySet refuses a JWKS with a private key, and then every token",
          errors.startswith("fetch-failed ") and "private member" in errors
          and answers == [answers[0]] and answers[0].startswith("refused keys-unavailable "), (answers, errors))

    # 3. Plain http is refused unless allowed, and then only to loopback: no fetch is made.
    before = len(requests)
    refused = subprocess.run(
        [CHECK, "--url", base + "/python/jwks.json", "--issuer", ISSUER, "--audience", AUDIENCE],
        input=tokens[0] + "\n", capture_output=True, text=True, timeout=60)
    check("RemoteKeySet refuses plain http to loopback without --allow-loopback-http, before any request",
          refused.returncode == 2 and refused.stderr.startswith("refused-url ") and len(requests) == before,
          (refused.returncode, refused.stderr))
finally:
    server.shutdown()
    server.server_close()

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
