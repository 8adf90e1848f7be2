"""Errors the shared core raises for bad input."""

from __future__ import annotations


class ParameterError(ValueError):
    """A parameter outside its allowed range; the message names both.

    `parameter` is the parameter's name as a user would write it (e.g. "flip1"), `allowed` the
    range in words (e.g. "(0, 1]" or "an integer >= 0"). Services map this to INVALID_ARGUMENT.
    The message reads "flip1 must be in (0, 1], got ..." for an interval and "k must be an
    integer >= 0, got ..." otherwise.
    """

    def __init__(self, parameter: str, value: object, allowed: str, detail: str = "") -> None:
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        self.detail = detail
        verb = "must be in" if allowed.startswith(("[", "(")) else "must be"
        message = f"{parameter} {verb} {allowed}, got {shown(value)}"
        if detail:
            message += f": {detail}"
        super().__init__(message)


ECHO_LIMIT = 80
"""At most this many characters of a bad value are repeated in a message (a 1 MB query id
must not come back in an error, nor overflow gRPC's metadata limit)."""


def shown(value: object, limit: int = ECHO_LIMIT) -> str:
    """`repr(value)`, cut to `limit` characters with the full length said when longer."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: limit - 3]}... ({size} characters)"
