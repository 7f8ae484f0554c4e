"""Pick the accumulator implementation: the compiled twin unless CALLSTITCH_NO_EXTENSIONS=1."""

import os

if os.environ.get("CALLSTITCH_NO_EXTENSIONS", "") not in ("", "0"):
    from ._accumulator_py import Accumulator

    IMPLEMENTATION = "python"
else:
    from ._accumulator_c import Accumulator  # a missing build is an error, never a silent fallback

    IMPLEMENTATION = "c"

__all__ = ["Accumulator", "IMPLEMENTATION"]
