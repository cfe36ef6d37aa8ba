"""The one compiled part: the near-duplicate search's loops for long texts (engine/audit/neardup/_kernels.c,
plain C loaded with ctypes). Optional: without a C compiler the install goes on and the search uses its
numpy path (same results, slower on long documents)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "engine.audit.neardup._kernels",
            ["engine/audit/neardup/_kernels.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
