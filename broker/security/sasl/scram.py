"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802), as Kafka's ``ScramSaslServer``, ``ScramFormatter`` and
``ScramMessages`` do them (docs/spec/security.md section 5).

A credential keeps the salt, the iterations, StoredKey and ServerKey, never the password. The exchange: the
client-first message names the user and a nonce; the server answers its nonce (the client's plus a fresh one), the
salt and the iterations; the client-final message carries the proof, checked against StoredKey in constant time;
the server-final message is the server signature. Every failure but a foreign authorization id is generic (the
client is not told which step failed); Kafka 4.0 requires the client-final nonce to equal the server-first one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl.mechanism import SaslFailure
from broker.server.settings import SCRAM_SHA_256, SCRAM_SHA_512

# Mechanism -> (hash name, Kafka's ScramMechanism type code as the SCRAM credential APIs carry it).
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISM_CODES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_CODE = {code: name for name, code in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # ScramMechanism.maxIterations (AlterUserScramCredentials' bound)
DEFAULT_ITERATIONS = MIN_ITERATIONS

# ScramMessages' grammar: a saslname is 7-bit, no "=" or "," except the escapes =2C and =3D; a nonce is printable
# ASCII without ","; extensions are key=value pairs.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = r"(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m=[^,]*,)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of one user's password for one mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def __repr__(self) -> str:  # keys are password equivalents for an attacker: never in a log or a traceback
        return f"ScramCredential(iterations={self.iterations})"


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC, one block (ScramFormatter.hi)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    name = HASHES[mechanism]
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(
        salt, iterations, hashlib.new(name, client_key).digest(), _hmac(name, salted, b"Server Key")
    )


def random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36."""
    number = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while number:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
    return text or "0"


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A credential with a fresh salt (the ASCII bytes of a random base-36 string, as Kafka's generator)."""
    salt = random_string().encode()
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def username(saslname: str) -> str:
    """ScramFormatter.username: =2C is ",", =3D is "=", any other "=" makes the name invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslFailure(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange; ``credential_of(user, mechanism)`` looks the credential up (None: no such one)."""

    def __init__(self, mechanism: str, credential_of: Callable[[str, str], ScramCredential | None]) -> None:
        self._mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credential_of = credential_of
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.complete = False
        self.authorization_id = ""
        self.user = ""
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("SCRAM exchange already complete")
        if self._credential is None:
            return self._client_first(token)
        return self._client_final(token)

    def _client_first(self, token: bytes) -> bytes:
        match = _CLIENT_FIRST.fullmatch(token.decode("utf-8", errors="replace"))
        if match is None:
            raise SaslFailure("Invalid SCRAM client first message format")
        self.user = username(match["saslname"])
        credential = self._credential_of(self.user, self._mechanism)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        authzid = match["authzid"]
        if authzid and username(authzid) != self.user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username",
                tell=True,
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailure(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}")
        self._credential = credential
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + random_string()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(token.decode("utf-8", errors="replace"))
        if match is None:
            raise SaslFailure("Invalid SCRAM client final message format")
        if match["nonce"] != self._nonce:  # Kafka 4.0: equal, not merely ending with the server's part
            raise SaslFailure("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslFailure("Invalid client final message: proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        self.authorization_id = self.user
        self.complete = True
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
