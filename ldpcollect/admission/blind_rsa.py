"""RSA blind signatures, RFC 9474: Prepare, Blind, BlindSign, Finalize, Verify.

The four RSABSSA-SHA384 variants differ in two switches: the PSS salt length (48 bytes, or 0
for PSSZERO) and whether Prepare prepends 32 random bytes to the message (Randomized) or
passes it through (Deterministic). Privacy Pass token type 2 uses PSS-Deterministic: its token
input already starts with a fresh 32-byte nonce.

The client encodes its message with EMSA-PSS and multiplies it by r^e for a uniformly random r;
the signer raises that to d without learning the message; the client divides by r, getting a
plain RSASSA-PSS signature that anyone verifies with the public key. Key generation, hashing
for verification and the final PSS verification are `cryptography`'s; the arithmetic between
is Python integers.

Timing. Python integers are not constant time: `pow` takes time that depends on the values it
is given. For the client this leaks at most r to whoever can time its own process. For the
issuer it is the classic RSA timing channel on its private key (Kocher 1996; Brumley and Boneh
2003 recovered keys over a network from unblinded OpenSSL). `blind_sign` therefore blinds its
own input with a fresh random base before exponentiating (as OpenSSL does), so the timed values
are independent of anything an attacker chooses; adds a random multiple of p-1 (q-1) to each
CRT exponent, so the sequence of operations differs on every call; and checks the result
against the public key before returning it (which also stops faulty-CRT attacks). That is
mitigation, not a constant-time guarantee: an issuer facing attackers who can time it closely
(or share its machine) should keep the key in an HSM or a constant-time library, and
per-epoch keys bound how long any one key is exposed.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from ldpcollect.admission.errors import BlindSignatureError
from ldpcollect.admission.pss import emsa_pss_encode, random_salt

RANDOMIZE_PREFIX_LENGTH = 32


@dataclass(frozen=True)
class Variant:
    """One RSABSSA-SHA384 variant of RFC 9474 section 5."""

    name: str
    salt_length: int
    randomized: bool


PSS_RANDOMIZED = Variant("RSABSSA-SHA384-PSS-Randomized", 48, True)
PSSZERO_RANDOMIZED = Variant("RSABSSA-SHA384-PSSZERO-Randomized", 0, True)
PSS_DETERMINISTIC = Variant("RSABSSA-SHA384-PSS-Deterministic", 48, False)
PSSZERO_DETERMINISTIC = Variant("RSABSSA-SHA384-PSSZERO-Deterministic", 0, False)
VARIANTS = {
    v.name: v
    for v in (PSS_RANDOMIZED, PSSZERO_RANDOMIZED, PSS_DETERMINISTIC, PSSZERO_DETERMINISTIC)
}


@dataclass(frozen=True)
class Blinded:
    """Blind's output: the message to send to the signer and the inverse to keep (secret)."""

    blinded_msg: bytes
    inv: int = field(repr=False)


def modulus_length(public_key: rsa.RSAPublicKey) -> int:
    """The modulus length in bytes (the length of every blinded message and signature)."""
    return (public_key.key_size + 7) // 8


def prepare(variant: Variant, msg: bytes, *, prefix: bytes | None = None) -> bytes:
    """PrepareIdentity or PrepareRandomize: the message that is blinded, signed and verified.

    `prefix` fixes the randomized variants' 32 random bytes (for test vectors).
    """
    if not variant.randomized:
        if prefix is not None:
            raise BlindSignatureError(f"{variant.name} takes no message prefix")
        return msg
    if prefix is None:
        prefix = secrets.token_bytes(RANDOMIZE_PREFIX_LENGTH)
    if len(prefix) != RANDOMIZE_PREFIX_LENGTH:
        raise BlindSignatureError(
            f"message prefix must be {RANDOMIZE_PREFIX_LENGTH} bytes, got {len(prefix)}"
        )
    return prefix + msg


def blind(
    public_key: rsa.RSAPublicKey,
    prepared_msg: bytes,
    variant: Variant,
    *,
    salt: bytes | None = None,
    r: int | None = None,
) -> Blinded:
    """Blind (RFC 9474 section 4.2). `salt` and the blinding factor `r` are drawn fresh unless
    given (test vectors give them)."""
    numbers = public_key.public_numbers()
    n, e = numbers.n, numbers.e
    k = modulus_length(public_key)
    if salt is None:
        salt = random_salt(variant.salt_length)
    elif len(salt) != variant.salt_length:
        raise BlindSignatureError(
            f"{variant.name} needs a {variant.salt_length}-byte salt, got {len(salt)}"
        )
    encoded = emsa_pss_encode(prepared_msg, n.bit_length() - 1, salt)
    m = int.from_bytes(encoded, "big")
    if math.gcd(m, n) != 1:
        raise BlindSignatureError("invalid input: the encoded message shares a factor with n")
    if r is None:
        r = secrets.randbelow(n - 1) + 1
    try:
        inv = pow(r, -1, n)
    except ValueError:
        raise BlindSignatureError("blinding error: r is not invertible modulo n") from None
    z = m * pow(r, e, n) % n
    return Blinded(z.to_bytes(k, "big"), inv)


def blind_sign(private_key: rsa.RSAPrivateKey, blinded_msg: bytes) -> bytes:
    """BlindSign (RFC 9474 section 4.3): blinded_msg^d mod n, checked with the public key.

    The exponentiation uses the CRT with blinded base and exponents (see the module
    docstring); the result is the same s = m^d mod n the RFC specifies.
    """
    numbers = private_key.private_numbers()
    public = numbers.public_numbers
    n, e = public.n, public.e
    k = modulus_length(private_key.public_key())
    if len(blinded_msg) != k:
        raise BlindSignatureError(
            f"unexpected input size: blinded message must be {k} bytes, got {len(blinded_msg)}"
        )
    m = int.from_bytes(blinded_msg, "big")
    if m >= n:
        raise BlindSignatureError("message representative out of range: not below n")
    base_blind = secrets.randbelow(n - 2) + 2
    while math.gcd(base_blind, n) != 1:  # probability about 2^-1023
        base_blind = secrets.randbelow(n - 2) + 2
    blinded_base = m * pow(base_blind, e, n) % n
    p, q = numbers.p, numbers.q
    # Exponent blinding: d mod (p-1) plus a random multiple of p-1 gives the same power but a
    # different sequence of squarings and multiplications on every call (64 bits, about +6%).
    s_p = pow(blinded_base, numbers.dmp1 + secrets.randbits(64) * (p - 1), p)
    s_q = pow(blinded_base, numbers.dmq1 + secrets.randbits(64) * (q - 1), q)
    s = (s_q + q * (numbers.iqmp * (s_p - s_q) % p)) * pow(base_blind, -1, n) % n
    if pow(s, e, n) != m:
        raise BlindSignatureError("signing failure: the signature does not verify")
    return s.to_bytes(k, "big")


def finalize(
    public_key: rsa.RSAPublicKey,
    prepared_msg: bytes,
    blind_sig: bytes,
    inv: int,
    variant: Variant,
) -> bytes:
    """Finalize (RFC 9474 section 4.4): unblind and verify; returns the signature."""
    n = public_key.public_numbers().n
    k = modulus_length(public_key)
    if len(blind_sig) != k:
        raise BlindSignatureError(
            f"unexpected input size: blind signature must be {k} bytes, got {len(blind_sig)}"
        )
    z = int.from_bytes(blind_sig, "big")
    if z >= n:
        raise BlindSignatureError("invalid signature: blind signature not below n")
    sig = (z * inv % n).to_bytes(k, "big")
    if not verify(public_key, prepared_msg, sig, variant):
        raise BlindSignatureError("invalid signature: the unblinded signature does not verify")
    return sig


def pss_padding(variant: Variant) -> padding.PSS:
    return padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=variant.salt_length)


def verify(public_key: rsa.RSAPublicKey, prepared_msg: bytes, sig: bytes, variant: Variant) -> bool:
    """RSASSA-PSS-VERIFY with SHA-384, MGF1-SHA-384 and the variant's salt length."""
    try:
        public_key.verify(sig, prepared_msg, pss_padding(variant), hashes.SHA384())
    except InvalidSignature:
        return False
    return True
