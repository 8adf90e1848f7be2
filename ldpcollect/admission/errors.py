"""Errors the admission core raises; each names what was wrong so a caller can act on it."""

from __future__ import annotations


class AdmissionError(ValueError):
    """Base of the admission errors (a ValueError: all of them are refusals of bad input)."""


class EncodingError(AdmissionError):
    """A token structure has the wrong length, type or field value. Maps to INVALID_ARGUMENT."""


class BlindSignatureError(AdmissionError):
    """One of RFC 9474's errors: "message too long", "invalid input", "signing failure",
    "invalid signature" (the message says which)."""


class UnknownKeyError(AdmissionError):
    """A request or token names a token key the receiver does not hold."""


class IssuanceRefused(AdmissionError):
    """The issuer will not sign for this client now (its quota for the epoch is spent).
    Maps to RESOURCE_EXHAUSTED."""
