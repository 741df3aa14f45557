#!/usr/bin/env python3
"""Interoperability of the runtime's signed identity assertions with PyJWT (an implementation nobody here wrote).

    python3 scripts/jwt-interop.py PATH/TO/identity-harness

1. Python signs (PyJWT, EdDSA, key from `cryptography`), Swift verifies.
2. Swift signs, Python verifies (signature, issuer, audience, expiry).
3. Python forges: alg none, HS256 keyed with the public key, another key, a tampered payload, an embedded
   jwk header, an unknown kid, the wrong audience and issuer, an expired token, a replay. Swift refuses each
   with the expected error code.
4. JWKS both ways: PyJWT verifies Swift's tokens with the key it takes from Swift's published JWKS
   (`PyJWKSet.from_json`); Swift verifies PyJWT's tokens with a key set read from a JWKS Python wrote
   (`OKPAlgorithm.to_jwk`), in single-use and reusable mode, and refuses a Python JWKS that holds a private key.
Prints one line per check and 'N passed, N failed'; exits 1 on any failure.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

# Not in Python's standard library: .ci/lib.sh's step_pyjwt installs them from PyPI before this runs.
try:
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives import serialization
except ImportError as error:
    sys.exit(f"{error}: this check needs PyJWT and cryptography: "
             'python3 -m pip install "pyjwt>=2.8" "cryptography>=41"')

HARNESS = sys.argv[1] if len(sys.argv) > 1 else ".build/debug/identity-harness"
ISSUER, AUDIENCE = "frontend", "documents"
results = []


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(("PASS " if condition else "FAIL ") + name + (f": {detail}" if detail and not condition else ""))


def raw_public(private_key):
    return private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def swift_verify(public_key_raw, kid, tokens):
    """Verifies every token with one Swift verifier; returns one answer line per token."""
    process = subprocess.run(
        [HARNESS, "assertion", "verify", "--public-key", public_key_raw.hex(), "--kid", kid,
         "--issuer", ISSUER, "--audience", AUDIENCE],
        input="\n".join(tokens) + "\n", capture_output=True, text=True, check=True)
    return process.stdout.strip().splitlines()


def swift_verify_jwks(jwks_text, tokens, mode="single-use"):
    """Verifies every token with one Swift verifier whose keys come from the JWKS document `jwks_text`."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        file.write(jwks_text)
    try:
        return subprocess.run(
            [HARNESS, "assertion", "verify", "--jwks", file.name, "--issuer", ISSUER, "--audience", AUDIENCE,
             "--mode", mode], input="\n".join(tokens) + "\n", capture_output=True, text=True)
    finally:
        os.unlink(file.name)


def claims(**overrides):
    now = int(time.time())
    values = {"sub": "alice@contoso.com", "tid": "contoso.com", "iss": ISSUER, "aud": AUDIENCE,
              "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    values.update(overrides)
    return values


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


python_key = Ed25519PrivateKey.generate()
python_public = raw_public(python_key)

# 1. Python signs, Swift verifies.
good = jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py1"})
answers = swift_verify(python_public, "py1", [good])
check("PyJWT-signed token verified by Swift", answers == ['accepted "alice@contoso.com" "contoso.com"'], answers)

# 2. Swift signs, Python verifies.
keygen = subprocess.run([HARNESS, "assertion", "keygen"], capture_output=True, text=True, check=True).stdout.split()
swift_private, swift_public = bytes.fromhex(keygen[1]), bytes.fromhex(keygen[3])
token = subprocess.run(
    [HARNESS, "assertion", "sign", "--private-key", swift_private.hex(), "--kid", "sw1", "--issuer", ISSUER,
     "--audience", AUDIENCE, "--account", "bob@fabrikam.com", "--tenant", "fabrikam.com"],
    capture_output=True, text=True, check=True).stdout.strip()
swift_public_key = serialization.load_der_public_key(
    bytes.fromhex("302a300506032b6570032100") + swift_public)
try:
    decoded = jwt.decode(token, swift_public_key, algorithms=["EdDSA"], audience=AUDIENCE, issuer=ISSUER)
    header = jwt.get_unverified_header(token)
    check("Swift-signed token verified by PyJWT",
          decoded["sub"] == "bob@fabrikam.com" and decoded["tid"] == "fabrikam.com" and header["alg"] == "EdDSA"
          and header["kid"] == "sw1" and decoded["exp"] - decoded["iat"] == 300 and decoded["jti"], decoded)
except jwt.PyJWTError as error:
    check("Swift-signed token verified by PyJWT", False, repr(error))
try:
    jwt.decode(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"), swift_public_key,
               algorithms=["EdDSA"], audience=AUDIENCE, issuer=ISSUER)
    check("PyJWT refuses a Swift token with a tampered signature", False)
except jwt.PyJWTError:
    check("PyJWT refuses a Swift token with a tampered signature", True)

# 3. Python forges; Swift refuses with the expected code.
other_key = Ed25519PrivateKey.generate()
header_none = b64(json.dumps({"alg": "none", "kid": "py1"}).encode())
payload = b64(json.dumps(claims()).encode())
good_parts = jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py1"}).split(".")
tampered_payload = b64(json.dumps(claims(sub="mallory@contoso.com")).encode())
jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(other_key.public_key()))
replay = jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py1"})
def signed_by_hand(header, payload):
    """A token PyJWT would not write (it drops a None typ): the JSON as given, signed with the Python key."""
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    return signing_input + "." + b64(python_key.sign(signing_input.encode()))


forgeries = [
    ("alg none", f"{header_none}.{payload}.", 2),
    ("HS256 keyed with the public key", jwt.encode(claims(), python_public, algorithm="HS256", headers={"kid": "py1"}), 2),
    ("signed with another key", jwt.encode(claims(), other_key, algorithm="EdDSA", headers={"kid": "py1"}), 5),
    ("tampered payload", f"{good_parts[0]}.{tampered_payload}.{good_parts[2]}", 5),
    ("embedded jwk header", jwt.encode(claims(), other_key, algorithm="EdDSA", headers={"kid": "py1", "jwk": jwk}), 3),
    ("unknown kid", jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py9"}), 4),
    ("wrong audience", jwt.encode(claims(aud="billing"), python_key, algorithm="EdDSA", headers={"kid": "py1"}), 8),
    ("wrong issuer", jwt.encode(claims(iss="evil"), python_key, algorithm="EdDSA", headers={"kid": "py1"}), 9),
    ("expired", jwt.encode(claims(iat=int(time.time()) - 3600, exp=int(time.time()) - 600), python_key,
                           algorithm="EdDSA", headers={"kid": "py1"}), 6),
    ("not yet valid", jwt.encode(claims(nbf=int(time.time()) + 3600), python_key, algorithm="EdDSA",
                                 headers={"kid": "py1"}), 7),
    # A JSON null is a wrong type, never an absent member.
    ("typ null", signed_by_hand({"alg": "EdDSA", "kid": "py1", "typ": None}, claims()), 1),
    ("nbf null", jwt.encode(claims(nbf=None), python_key, algorithm="EdDSA", headers={"kid": "py1"}), 1),
    ("tid null", jwt.encode(claims(tid=None), python_key, algorithm="EdDSA", headers={"kid": "py1"}), 1),
    # A lifetime beyond the verifier's maximum (one hour), and a tenant that would print a second line.
    ("exp = Int64.max", jwt.encode(claims(exp=2**63 - 1), python_key, algorithm="EdDSA", headers={"kid": "py1"}), 13),
    ("tid with a newline", jwt.encode(claims(tid="contoso.com\naccepted"), python_key, algorithm="EdDSA",
                                      headers={"kid": "py1"}), 14),
]
answers = swift_verify(python_public, "py1", [token for _, token, _ in forgeries] + [replay, replay])
for (name, _, code), answer in zip(forgeries, answers):
    check(f"Swift refuses the forgery '{name}' with code {code}", answer.startswith(f"refused {code} "), answer)
check("Swift accepts a token once", answers[len(forgeries)] == 'accepted "alice@contoso.com" "contoso.com"', answers[len(forgeries):])
check("Swift refuses its replay with code 10", answers[len(forgeries) + 1].startswith("refused 10 "), answers[len(forgeries):])

# 4. JWKS both ways.
# Swift signs and publishes its key as JWKS; PyJWT takes the key from that document.
with tempfile.TemporaryDirectory() as directory:
    jwks_path = os.path.join(directory, "swift-jwks.json")
    token = subprocess.run(
        [HARNESS, "assertion", "sign", "--private-key", swift_private.hex(), "--kid", "sw1", "--issuer", ISSUER,
         "--audience", AUDIENCE, "--account", "carol@contoso.com", "--tenant", "contoso.com", "--jwks-out", jwks_path],
        capture_output=True, text=True, check=True).stdout.strip()
    with open(jwks_path) as file:
        swift_jwks = file.read()
try:
    key_set = jwt.PyJWKSet.from_json(swift_jwks)
    kid = jwt.get_unverified_header(token)["kid"]
    matching = [key for key in key_set.keys if key.key_id == kid]
    published = json.loads(swift_jwks)["keys"][0]
    check("Swift's JWKS is an OKP Ed25519 signing key PyJWT reads",
          len(matching) == 1 and matching[0].algorithm_name == "EdDSA" and published["kty"] == "OKP"
          and published["crv"] == "Ed25519" and published["use"] == "sig" and "d" not in published, swift_jwks)
    decoded = jwt.decode(token, matching[0].key, algorithms=["EdDSA"], audience=AUDIENCE, issuer=ISSUER)
    check("PyJWT verifies a Swift token with the key from Swift's JWKS", decoded["sub"] == "carol@contoso.com", decoded)
except (jwt.PyJWTError, KeyError, IndexError) as error:
    check("PyJWT verifies a Swift token with the key from Swift's JWKS", False, repr(error))

# Python publishes its key as JWKS; Swift reads it and verifies PyJWT's tokens.
python_jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(python_key.public_key()))
python_jwk.update({"kid": "py-jwks", "use": "sig", "alg": "EdDSA"})
python_jwks = json.dumps({"keys": [python_jwk]})
check("PyJWT reads back its own JWKS", jwt.PyJWKSet.from_json(python_jwks).keys[0].key_id == "py-jwks")
bearer = jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py-jwks"})
other_kid = jwt.encode(claims(), python_key, algorithm="EdDSA", headers={"kid": "py1"})
single = swift_verify_jwks(python_jwks, [bearer, bearer, other_kid])
answers = single.stdout.strip().splitlines()
check("Swift verifies a PyJWT token with a key set read from Python's JWKS (single-use: then a replay)",
      single.returncode == 0 and len(answers) == 3 and answers[0] == 'accepted "alice@contoso.com" "contoso.com"'
      and answers[1].startswith("refused 10 ") and answers[2].startswith("refused 4 "), (single.stdout, single.stderr))
reusable = swift_verify_jwks(python_jwks, [bearer, bearer, bearer], mode="reusable")
answers = reusable.stdout.strip().splitlines()
check("Swift accepts a PyJWT bearer token at every use with a reusable verifier over Python's JWKS",
      reusable.returncode == 0 and answers == ['accepted "alice@contoso.com" "contoso.com"'] * 3, (reusable.stdout, reusable.stderr))
# A JWKS that holds a private key is refused as a whole, before any token.
private_jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(python_key))
private_jwk.update({"kid": "py-jwks"})
refused = swift_verify_jwks(json.dumps({"keys": [private_jwk]}), [bearer])
check("Swift refuses a Python JWKS holding a private key (d) with code 18",
      refused.returncode != 0 and "refused 18 " in refused.stderr and refused.stdout == "", (refused.stdout, refused.stderr))
# A second key with the same kid, and another curve (crv X25519), are refused too.
refused = swift_verify_jwks(json.dumps({"keys": [python_jwk, dict(python_jwk)]}), [bearer])
check("Swift refuses a JWKS with a duplicate kid with code 18", refused.returncode != 0 and "refused 18 " in refused.stderr,
      refused.stderr)
x25519 = dict(python_jwk, crv="X25519")
refused = swift_verify_jwks(json.dumps({"keys": [x25519]}), [bearer])
check("Swift refuses an X25519 key in a JWKS with code 18", refused.returncode != 0 and "refused 18 " in refused.stderr,
      refused.stderr)

passed, failed = sum(results), len(results) - sum(results)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
