"""Pick the accumulator implementation: the compiled twin unless CALLSTITCH_NO_EXTENSIONS=1."""

import os

if os.environ.get("CALLSTITCH_NO_EXTENSIONS", "") not in ("", "0"):
    from ._accumulator_py import Accumulator

    IMPLEMENTATION = "python"
else:
    try:
        from ._accumulator_c import Accumulator
    except ImportError as exc:  # a missing build is an error, never a silent fallback
        raise ImportError(f"callstitch's compiled extension is not available ({exc}); reinstall callstitch "
                          "with a C compiler, or set CALLSTITCH_NO_EXTENSIONS=1 to use the pure-Python "
                          "twin") from exc

    IMPLEMENTATION = "c"

__all__ = ["Accumulator", "IMPLEMENTATION"]
