"""Compiled extensions, built by pip at install with the machine's C compiler and Python headers
(the rest of the package's metadata is in pyproject.toml)."""

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            "aggregator._native_writer",
            ["aggregator/_native_writer.c"],
            extra_compile_args=_FLAGS,
        ),
        # Blind RSA signing and batched RSA-PSS verification on the machine's OpenSSL 3
        # (libcrypto and its headers: Debian's libssl-dev).
        Extension(
            "ldpcollect.admission._native_rsa",
            ["ldpcollect/admission/_native_rsa.c"],
            libraries=["crypto"],
            extra_compile_args=_FLAGS,
        ),
    ]
)
