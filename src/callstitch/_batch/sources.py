"""Inputs: expanding paths, directories and globs into sources; opening them, decompressed.

Compression is recognised by its magic bytes (a name is never trusted alone): gzip, bzip2,
xz and zstandard (with the ``zstandard`` package). Every reader decompresses as a stream.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import os
from typing import BinaryIO, Iterator

__all__ = ["expand", "open_source", "sniff_compression", "Problem", "STDIN", "BODY_SUFFIXES"]

STDIN = "-"

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)
COMPRESSION_SUFFIXES = (".gz", ".gzip", ".zst", ".zstd", ".bz2", ".xz")
# The files a directory walk takes (a file named on the command line is always taken).
BODY_SUFFIXES = (".sse", ".txt", ".ndjson", ".jsonl", ".eventstream", ".har", ".log", ".stream", ".bin")


class Problem(Exception):
    """An input that cannot be read: names the source and, where known, the byte position."""

    def __init__(self, kind: str, message: str, position: int | None = None) -> None:
        self.kind = kind
        self.message = message
        self.position = position
        super().__init__(message)

    def __reduce__(self):
        return (Problem, (self.kind, self.message, self.position))


def sniff_compression(head: bytes) -> str | None:
    """Return the compression a file's first bytes announce, or None."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def inner_name(path: str) -> str:
    """Return path without its compression suffix (``a.har.gz`` -> ``a.har``)."""
    lower = path.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)]
    return path


def _walked(path: str) -> bool:
    name = os.path.basename(path)
    if name.startswith("."):
        return False
    return inner_name(name).lower().endswith(BODY_SUFFIXES)


def expand(inputs: list[str]) -> Iterator[tuple[str, Problem | None]]:
    """Yield (source, problem) for each input: files, directories (recursively), globs and '-'.

    A directory contributes its files with a body-like name, in sorted order; a glob its
    matches, sorted. An input that names nothing yields a problem instead of a source.
    """
    for item in inputs:
        if item == STDIN:
            yield STDIN, None
        elif os.path.isdir(item):
            found = False
            for root, dirs, files in os.walk(item):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    path = os.path.join(root, name)
                    if _walked(path):
                        found = True
                        yield path, None
            if not found:
                yield item, Problem("input", "directory holds no captured responses")
        elif os.path.exists(item) or not glob.has_magic(item):
            yield item, None  # opened later: a missing file is reported with its error
        else:
            matches = sorted(glob.glob(item, recursive=True))
            if not matches:
                yield item, Problem("input", "no file matches this pattern")
            for path in matches:
                if os.path.isdir(path):
                    yield from expand([path])
                else:
                    yield path, None


def _zstd_reader(raw: BinaryIO) -> BinaryIO:
    try:
        import zstandard
    except ImportError:
        raise Problem("unreadable", "zstandard-compressed, and the zstandard package is not installed "
                                    "(pip install 'callstitch[zstd]')") from None
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)


def wrap(raw: BinaryIO, compression: str | None) -> BinaryIO:
    """Return a reader that decompresses raw as it is read."""
    if compression is None:
        return raw
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if compression == "bzip2":
        return bz2.BZ2File(raw, "rb")  # type: ignore[return-value]
    if compression == "xz":
        return lzma.LZMAFile(raw, "rb")  # type: ignore[return-value]
    return _zstd_reader(raw)


class _Peeked:
    """A reader that first gives back the bytes already read to sniff it."""

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head = head
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        head = self._head
        if head:
            if n < 0 or n >= len(head):
                self._head = b""
                rest = self._raw.read(-1 if n < 0 else n - len(head))
                return head + rest if rest else head
            self._head = head[n:]
            return head[:n]
        return self._raw.read(n)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        pass


def open_source(path: str) -> tuple[BinaryIO, str | None, BinaryIO]:
    """Open a source; return (decompressed reader, compression, the underlying file).

    Raises Problem when the file cannot be opened.
    """
    if path == STDIN:
        import sys
        raw: BinaryIO = sys.stdin.buffer
        head = raw.read(6)
        compression = sniff_compression(head)
        peeked = _Peeked(head, raw)
        return wrap(peeked, compression), compression, peeked  # type: ignore[arg-type]
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise Problem("unreadable", exc.strerror or str(exc)) from None
    try:
        head = raw.read(6)
    except OSError as exc:
        raw.close()
        raise Problem("unreadable", exc.strerror or str(exc)) from None
    raw.seek(0)
    compression = sniff_compression(head)
    return wrap(raw, compression), compression, raw


DECOMPRESSION_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, lzma.LZMAError, ValueError)
try:  # zstandard raises its own error type
    import zstandard as _zstd

    DECOMPRESSION_ERRORS = DECOMPRESSION_ERRORS + (_zstd.ZstdError,)
except ImportError:  # pragma: no cover - the extra is optional
    pass
