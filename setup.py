"""Build script for the compiled chunking kernel; everything else is in pyproject.toml.

The extension is optional: without a C compiler the build prints a warning and installs
the pure package, which runs the NumPy reference (``kbsync version --verbose`` says so).
"""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kbsync._kernel",
            # The module and its parts, one per concern (src/kernel/), as one translation unit.
            sources=["src/kbsync/_kernel.c"],
            include_dirs=["src/kernel"],
            depends=["src/kbsync/_nfc_table.h", *sorted(glob("src/kernel/*.h"))],
            optional=True,
        )
    ]
)
