"""Build the compiled twin; CALLSTITCH_NO_EXTENSIONS=1 installs the pure-Python twin alone."""

import os
import sys

from setuptools import Extension, setup

NO_EXTENSIONS = os.environ.get("CALLSTITCH_NO_EXTENSIONS", "") not in ("", "0")

if NO_EXTENSIONS:
    ext_modules = []
else:
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit("callstitch: Cython is needed to build the compiled extension.\n"
                 "Install it, or install the pure-Python twin with CALLSTITCH_NO_EXTENSIONS=1.")
    ext_modules = cythonize(
        [Extension("callstitch._accumulator_c", ["src/callstitch/_accumulator_c.pyx"],
                   include_dirs=["src/callstitch"],
                   extra_compile_args=[] if sys.platform == "win32" else ["-O3"])],
        language_level=3,
    )

try:
    setup(ext_modules=ext_modules)
except SystemExit:
    raise
except Exception as exc:  # a failed compile must fail loudly and say how to do without it
    sys.exit(f"callstitch: building the compiled extension failed ({exc}).\n"
             "To install the pure-Python twin instead, set CALLSTITCH_NO_EXTENSIONS=1.")
