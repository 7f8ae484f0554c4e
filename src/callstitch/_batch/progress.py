"""A one-line progress bar on standard error: bytes done of bytes known, rate, ETA."""

from __future__ import annotations

import time
from typing import Any, TextIO

_WIDTH = 24


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:d}:{s:02d}"


class Progress:
    """Redraw at most ten times a second; ``close()`` clears the line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._start = time.perf_counter()
        self._last = 0.0
        self._drawn = False

    def update(self, summary: Any, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        done, known = summary.bytes_read, max(summary.bytes_known, summary.bytes_read)
        elapsed = max(now - self._start, 1e-9)
        rate = done / elapsed
        frac = done / known if known else 0.0
        filled = int(frac * _WIDTH)
        eta = _clock((known - done) / rate) if rate > 0 and known > done else "--:--"
        line = (f"\r[{'#' * filled}{'.' * (_WIDTH - filled)}] {_size(done)} / {_size(known)} "
                f"{frac * 100:3.0f}%  {_size(rate)}/s  ETA {eta}  {summary.calls} calls")
        self._stream.write(line + "\x1b[K")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False
