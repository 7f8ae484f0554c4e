"""Hold the batch layer's sizes and the Accumulator it makes: one place for tests and tuning to set.

Every module of the batch layer reads these as ``settings.NAME`` when it runs, so a value set
here (a test's monkeypatch, say) reaches all of them.
"""

from __future__ import annotations

import os

from .._accumulator import Accumulator  # noqa: F401 - the twin the batch layer runs (tests swap it here)

BLOCK = 4 << 20          # one read
FEED = 1 << 18           # one feed of a read, when accumulators stop at their own terminator
# A large plain file is cut into tasks of this many bytes, the last few smaller (so workers end
# together), whatever the number of workers, so -j N writes what -j 1 writes. (The variable is
# for tests and tuning. The records do not depend on it: the plan moves each boundary to the first
# response start after it, plan._cut_bounds.)
RANGE = max(1, int(os.environ.get("CALLSTITCH_RANGE_BYTES", 64 << 20)))  # (0 would plan tasks without end)
LOOKBACK = 256 << 10     # a range task starts scanning this far before its start
PROBE = (4096, 65536, 1 << 20)  # how much of the first response format detection looks at
PROBE_MORE = 16 << 20    # and how far it reads on while the first event is not over (containers.detect_reading)
MAX_PROBLEMS = 50        # problems a task describes one by one (the rest are counted)
BIG_LINE = 1 << 16       # a record line longer than this is kept as it is, not copied
SPILL_BYTES = 32 << 20   # the records a whole-source task holds before they go to a temporary file
REREAD_BYTES = 16 << 20  # the most of a stream read again to cut it at an in-band error (streams._emit)
