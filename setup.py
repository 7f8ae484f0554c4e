"""Build the compiled twin; CALLSTITCH_NO_EXTENSIONS=1 installs the pure-Python twin alone."""

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

NO_EXTENSIONS = os.environ.get("CALLSTITCH_NO_EXTENSIONS", "") not in ("", "0")
HINT = "To install the pure-Python twin instead, set CALLSTITCH_NO_EXTENSIONS=1."
# In a package built with CALLSTITCH_NO_EXTENSIONS=1: it tells the import that the compiled twin is
# absent by choice, so the installed package runs as the pure twin without the variable.
PURE_MARKER = os.path.join("callstitch", "_pure_build.py")


class BuildExt(build_ext):
    """Fail loudly, saying how to do without the extension, when it does not compile."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # never a silent fallback: the install fails, and says why
            raise SystemExit(f"callstitch: building the compiled extension failed: {exc}\n{HINT}") from exc


class BuildPy(build_py):
    """Mark a pure build in the package it builds (and unmark a build directory reused for a compiled one)."""

    def run(self):
        super().run()
        marker = os.path.join(self.build_lib, PURE_MARKER)
        if NO_EXTENSIONS:
            with open(marker, "w", encoding="utf-8") as f:
                f.write('"""Written by setup.py: built with CALLSTITCH_NO_EXTENSIONS=1, the pure-Python twin alone."""\n')
        elif os.path.exists(marker):
            os.remove(marker)


if NO_EXTENSIONS:
    ext_modules = []
else:
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit(f"callstitch: Cython is needed to build the compiled extension.\n{HINT}")
    ext_modules = cythonize(
        # _slots.py is Python that both twins run: the compiled build compiles it too (typed by
        # _slots.pxd), and the pure twin runs its source (_pure.py).
        [Extension("callstitch._slots", ["src/callstitch/_slots.py"], depends=["src/callstitch/_slots.pxd"],
                   extra_compile_args=[] if sys.platform == "win32" else ["-O3"]),
         Extension("callstitch._accumulator_c", ["src/callstitch/_accumulator_c.pyx"],
                   include_dirs=["src/callstitch"],
                   # the headers and .pxi files the pyx includes: a change to one rebuilds it
                   depends=sorted(glob.glob("src/callstitch/_c/*.h") + glob.glob("src/callstitch/_c/*.pxi"))
                   + ["src/callstitch/_slots.pxd"],
                   extra_compile_args=[] if sys.platform == "win32" else ["-O3"])],
        language_level=3,
    )

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
