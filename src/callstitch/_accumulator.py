"""Pick the accumulator implementation: the compiled twin unless CALLSTITCH_NO_EXTENSIONS=1 or a pure install."""

import os
from importlib.util import find_spec

# setup.py writes _pure_build into a package it builds with CALLSTITCH_NO_EXTENSIONS=1: that install
# has no compiled twin by choice, and runs as the pure one without the variable set again.
_PURE_INSTALL = find_spec(f"{__package__}._pure_build") is not None

if _PURE_INSTALL or os.environ.get("CALLSTITCH_NO_EXTENSIONS", "") not in ("", "0"):
    from ._accumulator_py import Accumulator

    IMPLEMENTATION = "python"
else:
    try:
        from ._accumulator_c import Accumulator  # type: ignore[assignment]  # (type checkers read the pure twin)
    except ImportError as exc:  # a missing build is an error, never a silent fallback
        raise ImportError(f"callstitch's compiled extension is not available ({exc}); reinstall callstitch "
                          "with a C compiler, or set CALLSTITCH_NO_EXTENSIONS=1 to use the pure-Python "
                          "twin") from exc

    IMPLEMENTATION = "c"

__all__ = ["Accumulator", "IMPLEMENTATION"]
