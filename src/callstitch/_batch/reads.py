"""Read a task's bytes: a peek given back first, reads up to a limit, decompression errors as Problems."""

from __future__ import annotations

from typing import Any

from . import settings
from .sources import DECOMPRESSION_ERRORS, Problem


class Prefixed:
    """A reader that gives back bytes already read first.

    Damage met while the head was read, or while it is filled up, is raised at the read after the
    head's bytes: what decoded before the damage is read first, as every reader here promises.
    """

    def __init__(self, head: bytes, reader: Any, damage: Problem | None = None) -> None:
        self._head = head
        self._reader = reader
        self._damage = damage

    def read(self, n: int) -> bytes:
        if self._head:
            head, self._head = self._head[:n], self._head[n:]
            if len(head) < n and self._damage is None:  # filled up: format detection needs what it asks for
                try:
                    return head + self._reader.read(n - len(head))
                except Problem as damage:
                    self._damage = damage
            return head
        if self._damage is not None:
            problem, self._damage = self._damage, None
            raise problem
        return self._reader.read(n)

    def readinto(self, view: Any) -> int:
        """Fill view straight from the reader once the head is given back (no copy in between)."""
        if self._head or self._damage is not None:
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


def peek_line(reader: Any, head: bytes) -> tuple[bytes, Problem | None]:
    """Return head and what follows it up to the end of the first line (at most PROBE[-1] bytes).

    Damage met on the way is returned with the bytes before it, for Prefixed to raise after them.
    """
    parts = [head]
    size = len(head)
    while b"\n" not in parts[-1] and size < settings.PROBE[-1]:
        try:
            more = Reads(reader, size, None).read(65536)
        except Problem as damage:
            return b"".join(parts), damage
        if not more:
            break
        parts.append(more)
        size += len(more)
    return b"".join(parts), None
