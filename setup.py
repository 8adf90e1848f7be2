"""Compiled extensions, built by pip at install with the machine's C compiler and Python headers
(the rest of the package's metadata is in pyproject.toml). Each has a pure-Python reference
that its tests compare it with."""

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
NATIVE_VDAF = "ldpcollect/vdaf/native_c/"

setup(
    ext_modules=[
        # Prio3's field arithmetic, NTTs, TurboSHAKE128 and batched verification.
        Extension(
            "ldpcollect.vdaf._native",
            [NATIVE_VDAF + name for name in ("module.c", "prio3.c", "kernels.c", "turboshake.c")],
            depends=[
                NATIVE_VDAF + name
                for name in (
                    "field.h",
                    "kernels.h",
                    "kernels_impl.h",
                    "module_kernels.h",
                    "prio3.h",
                    "turboshake.h",
                )
            ],
            extra_compile_args=_FLAGS,
        ),
        # The trusted writer's key table, batch decoder and bit sums.
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
        # Batched HPKE base-mode Open and Seal (X25519, HKDF-SHA256, AES-128-GCM) on the same
        # libcrypto, X25519 eight at a time where the CPU has AVX-512 IFMA.
        Extension(
            "ldpcollect.secure._native_hpke",
            [
                "ldpcollect/secure/" + name
                for name in (
                    "_native_hpke.c",
                    "hpke_suite.c",
                    "hpke_seal_shares.c",
                    "x25519_lanes.c",
                )
            ],
            depends=[
                "ldpcollect/secure/" + name
                for name in ("hpke_suite.h", "hpke_seal_shares.h", "x25519_lanes.h")
            ],
            libraries=["crypto"],
            extra_compile_args=_FLAGS,
        ),
    ]
)
