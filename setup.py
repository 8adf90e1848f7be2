"""Compiled extensions, built by pip at install with the machine's C compiler (the rest of the
package's metadata is in pyproject.toml)."""

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            "aggregator._native_writer",
            ["aggregator/_native_writer.c"],
            extra_compile_args=_FLAGS,
        ),
    ]
)
