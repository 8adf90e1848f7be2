from setuptools import Extension, setup

NATIVE_VDAF = "ldpcollect/vdaf/native_c/"

setup(
    ext_modules=[
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
            extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
