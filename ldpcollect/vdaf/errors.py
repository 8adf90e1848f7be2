"""The errors the VDAF raises: a message, a share or a parameter that must be refused."""

from __future__ import annotations


class VdafError(ValueError):
    """Bad input to the VDAF: a malformed encoding, a failed proof or joint-randomness check,
    a parameter out of range. A report that raises it during verification is rejected."""


class MalformedShare(VdafError):
    """A share that does not decode (wrong length, an element not below the modulus), as
    distinct from one that decodes but fails its proof."""
