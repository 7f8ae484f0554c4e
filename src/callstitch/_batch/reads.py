"""Read a task's bytes: a peek given back first, reads up to a limit, decompression errors as Problems."""

from __future__ import annotations

from typing import Any

from . import settings
from .sources import DECOMPRESSION_ERRORS, Problem


class Prefixed:
    """A reader that gives back bytes already read first."""

    def __init__(self, head: bytes, reader: Any) -> None:
        self._head = head
        self._reader = reader

    def read(self, n: int) -> bytes:
        if self._head:
            head, self._head = self._head[:n], self._head[n:]
            if len(head) < n:  # filled up: format detection needs what it asks for, not just the peek
                return head + self._reader.read(n - len(head))
            return head
        return self._reader.read(n)

    def readinto(self, view: Any) -> int:
        """Fill view straight from the reader once the head is given back (no copy in between)."""
        if self._head:
            data = self.read(len(view))
            view[:len(data)] = data
            return len(data)
        readinto = getattr(self._reader, "readinto", None)
        if readinto is None:
            data = self._reader.read(len(view))
            view[:len(data)] = data
            return len(data)
        return readinto(view) or 0

    def close(self) -> None:
        self._reader.close()


class Reads:
    """Reads of a task's bytes: up to a limit, with decompression errors turned into Problems."""

    def __init__(self, reader: Any, position: int, limit: int | None) -> None:
        self.reader = reader
        self.position = position
        self.limit = limit

    def read(self, n: int) -> bytes:
        if self.limit is not None:
            n = min(n, self.limit - self.position)
            if n <= 0:
                return b""
        try:
            data = self.reader.read(n)
        except DECOMPRESSION_ERRORS as exc:
            raise Problem("corrupt archive", f"cannot decompress: {exc}", self.position) from None
        self.position += len(data)
        return data

    def read_into(self, buf: bytearray) -> memoryview:
        """Fill buf from the reader (no new allocation per read); return the filled part."""
        n = len(buf)
        if self.limit is not None:
            n = min(n, self.limit - self.position)
            if n <= 0:
                return memoryview(buf)[:0]
        readinto = getattr(self.reader, "readinto", None)
        if readinto is None:
            data = self.read(n)
            buf[:len(data)] = data
            return memoryview(buf)[:len(data)]
        view = memoryview(buf)[:n]
        try:
            got = readinto(view) or 0
        except DECOMPRESSION_ERRORS as exc:
            raise Problem("corrupt archive", f"cannot decompress: {exc}", self.position) from None
        finally:
            view.release()
        self.position += got
        return memoryview(buf)[:got]


def peek(reader: Any) -> bytes:
    try:
        return reader.read(4096)
    except DECOMPRESSION_ERRORS as exc:
        raise Problem("corrupt archive", f"cannot decompress: {exc}", 0) from None


def peek_line(reader: Any, head: bytes) -> bytes:
    """Return head and what follows it up to the end of the first line (at most PROBE[-1] bytes)."""
    parts = [head]
    size = len(head)
    while b"\n" not in parts[-1] and size < settings.PROBE[-1]:
        more = Reads(reader, size, None).read(65536)
        if not more:
            break
        parts.append(more)
        size += len(more)
    return b"".join(parts)
