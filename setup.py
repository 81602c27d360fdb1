"""Build script for the compiled chunking kernel; everything else is in pyproject.toml.

The extension is optional: without a C compiler the build prints a warning and installs
the pure package, which runs the NumPy reference (``kbsync version --verbose`` says so).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kbsync._kernel",
            sources=["src/kbsync/_kernel.c"],
            depends=["src/kbsync/_nfc_table.h"],
            optional=True,
        )
    ]
)
