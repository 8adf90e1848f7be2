"""Errors the shared core raises for bad input."""

from __future__ import annotations


class ParameterError(ValueError):
    """A parameter outside its allowed range; the message names both.

    `parameter` is the parameter's name as a user would write it (e.g. "flip1"), `allowed` the
    range in words (e.g. "(0, 1]"). Services map this to INVALID_ARGUMENT.
    """

    def __init__(self, parameter: str, value: object, allowed: str, detail: str = "") -> None:
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        message = f"{parameter} must be in {allowed}, got {value!r}"
        if detail:
            message += f": {detail}"
        super().__init__(message)
