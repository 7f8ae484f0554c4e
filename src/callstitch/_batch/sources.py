"""Inputs: expanding paths, directories and globs into sources; opening them, decompressed.

Compression is recognised by its magic bytes (a name is never trusted alone): gzip, bzip2,
xz and zstandard (with the ``zstandard`` package). Every reader decompresses as a stream.
"""

from __future__ import annotations

import bz2
import fnmatch
import functools
import glob
import lzma
import os
import stat
import zlib
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Union

__all__ = ["Sources", "source_names", "expand", "open_source", "sniff_compression", "Problem", "STDIN", "BODY_SUFFIXES"]

STDIN = "-"
# What reassemble_many takes: one path, or an iterable of them.
Sources = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]

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


def source_names(sources: Any) -> list[str]:
    """Return reassemble_many's sources as a list of path strings, or raise a TypeError that says what was wrong.

    A path is a str or an os.PathLike (pathlib.Path); one path alone is one source. Bytes are
    refused, not read as a path: in this library bytes are a body, and a body given here would
    otherwise be reported as a missing file named after its text.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    elif isinstance(sources, (bytes, bytearray, memoryview)):
        raise TypeError(_NOT_A_PATH.format(what="sources", kind=type(sources).__name__))
    try:
        items = iter(sources)
    except TypeError:
        raise TypeError(f"reassemble_many takes paths (str or os.PathLike), or an iterable of them; "
                        f"not {type(sources).__name__}") from None
    names = []
    for number, item in enumerate(items):
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
            if isinstance(item, bytes):
                item = os.fsdecode(item)  # (a PathLike that names its path in bytes)
            if item == STDIN:
                item = os.path.join(os.curdir, STDIN)  # a Path names a file: "-" alone is standard input
        if not isinstance(item, str):
            raise TypeError(_NOT_A_PATH.format(what=f"source {number}", kind=type(item).__name__))
        names.append(item)
    return names


_NOT_A_PATH = ("reassemble_many: {what} is {kind}, not a path (str or os.PathLike); for a body held in memory "
               "use callstitch.reassemble(body), and give a path held in bytes as os.fsdecode(path)")


def expand(inputs: list[str], written: str | None = None) -> Iterator[tuple[str, Problem | None]]:
    """Yield (source, problem) for each input: files, directories (recursively), globs and '-'.

    A directory contributes its regular files with a body-like name, in sorted order; a glob
    its matches, sorted. Walking never follows a symbolic link to a directory and never opens
    what is not a regular file (a FIFO would block it for good); a file met twice, under any
    name, is read once. What is named on the command line is read whatever it is (a FIFO such
    as ``<(zcat day.gz)``, /dev/stdin). An input that names nothing yields a problem instead.
    written: the file the run writes its output to (the command line's -o), never read as an input
    where a directory or a glob holds it.
    """
    seen: set = set()  # (st_dev, st_ino) of every regular file yielded
    output = _file_key(written) if written is not None else None
    if output is not None:
        seen.add(output)  # (where a directory or glob meets it, it is skipped)
    for item in inputs:
        if item == STDIN:
            yield STDIN, None
        elif not _encodable(item):
            yield item, Problem("input", "the name holds a character no file name can (a lone surrogate)")
        elif "\x00" in item:
            yield item, Problem("input", "the name holds a NUL character, which no file name can")
        elif os.path.isdir(item):
            yield from _walk(item, seen)
        elif output is not None and _file_key(item) == output:
            yield item, Problem("input", "it is the file the output is written to (emptied as the run began)")
        elif os.path.exists(item) or not glob.has_magic(item):
            if _first_time(item, seen, named=True):  # a missing file is reported when it is opened
                yield item, None
        else:
            matches = _glob(item)
            if not matches:
                yield item, Problem("input", "no file matches this pattern")
            for path in matches:
                if os.path.isdir(path):
                    if not os.path.islink(path):  # (a '**' lists a link to a directory, never followed)
                        yield from _walk(path, seen)
                elif _first_time(path, seen, named=False):
                    yield path, None


def _encodable(name: str) -> bool:
    """Tell whether a name can be given to the file system (os.fsencode): a lone surrogate it did not make cannot."""
    if name.isascii():
        return True
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return False
    return True


def _file_key(path: str) -> tuple[int, int] | None:
    """Return (st_dev, st_ino) of a regular file, or None (none there, or no regular file)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _first_time(path: str, seen: set, named: bool) -> bool | None:
    """Tell whether path is to be read: True for a regular file not met before, False for one met
    before, None for what is not a regular file (True when it was named: it is read as a stream)."""
    try:
        st = os.stat(path)
    except OSError:
        return True  # a dangling link, say: opening it reports why
    if not stat.S_ISREG(st.st_mode):
        return True if named else None
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return False
    seen.add(key)
    return True


def _walk(root: str, seen: set) -> Iterator[tuple[str, Problem | None]]:
    """Yield the capture files under root: each directory's files, sorted, then its subdirectories."""
    found = False
    todo = [root]
    while todo:
        top = todo.pop()
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield top, Problem("unreadable", f"cannot list the directory: {exc.strerror or exc}")
            continue
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.path)
            elif _walked(entry.path) and not _is_dir_link(entry):
                new = _first_time(entry.path, seen, named=False)
                found = found or new is not None
                if new:
                    yield entry.path, None
        todo.extend(reversed(subdirs))  # depth first, in sorted order
    if not found:
        yield root, Problem("input", "directory holds no captured responses")


def _is_dir_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:  # a link loop, say: no directory to walk; opening it reports what it is
        return False


def _glob(pattern: str) -> list[str]:
    """Return the sorted matches of a glob pattern, '**' matching any depth of real directories.

    The standard glob follows symbolic links to directories under '**': one link to its own
    directory repeats every file 40 times, two make the walk run forever.
    """
    parts = pattern.split(os.sep)
    if "**" not in parts:
        return sorted(glob.glob(pattern))
    fixed = 0
    while fixed < len(parts) and not glob.has_magic(parts[fixed]):
        fixed += 1
    base = os.sep.join(parts[:fixed]) or (os.sep if pattern.startswith(os.sep) else "")
    wanted = tuple(parts[fixed:])
    matches = []
    for dirpath, dirnames, filenames in os.walk(base or os.curdir):  # never into linked directories
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = os.path.relpath(dirpath, base or os.curdir)
        names = () if rel == os.curdir else tuple(rel.split(os.sep))
        for name in dirnames + filenames:
            if _matches(wanted, names + (name,)):
                matches.append(os.path.join(base, *names, name) if base else os.path.join(*names, name))
    return sorted(matches)


def _matches(pattern: tuple[str, ...], names: tuple[str, ...]) -> bool:
    """Tell whether path components match pattern components ('**': zero or more components)."""
    @functools.lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(names)
        if pattern[i] == "**":
            return match(i + 1, j) or (j < len(names) and not names[j].startswith(".") and match(i, j + 1))
        if j == len(names) or (names[j].startswith(".") and not pattern[i].startswith(".")):
            return False
        return fnmatch.fnmatchcase(names[j], pattern[i]) and match(i + 1, j + 1)
    return match(0, 0)


DECOMPRESSION_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, lzma.LZMAError, ValueError,
                                                         zlib.error)
try:  # zstandard raises its own error type
    import zstandard as _zstd

    DECOMPRESSION_ERRORS = DECOMPRESSION_ERRORS + (_zstd.ZstdError,)
except ImportError:  # pragma: no cover - the extra is optional
    pass

STEP = 1 << 16   # bzip2, xz, zstd: bytes decoded per call at most, the most a corrupt stretch can take with it
PIECE = 1 << 16  # compressed bytes read from the file at a time


class _Damage(Exception):
    """Corrupt data met by a decoder that could still hand over what it decoded before it."""

    def __init__(self, good: bytes, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.good = good


class _GzipMember:
    """One gzip member, with the interface of bz2's and lzma's decompressors (zlib keeps a tail instead).

    A call decodes as much as it is asked for (the fastest way); at damage it decodes the same
    input again from a copy of the state taken before, a few bytes at a time, so that what comes
    before the damage is kept to within a few bytes.
    """

    step = 1 << 18
    SALVAGE = 64  # input bytes per call when decoding again up to the damage

    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)  # checks the header, the CRC and the length

    def decompress(self, data: bytes, max_length: int) -> bytes:
        tail = self._z.unconsumed_tail
        if tail:
            data = tail + data
        before = self._z.copy()
        try:
            return self._z.decompress(data, max_length)
        except zlib.error as exc:
            raise _Damage(self._salvage(before, data), exc) from None

    def _salvage(self, z: Any, data: bytes) -> bytes:
        good = []
        for i in range(0, len(data), self.SALVAGE):
            try:
                good.append(z.decompress(data[i:i + self.SALVAGE]))
            except zlib.error:
                break
        return b"".join(good)

    @property
    def eof(self) -> bool:
        return self._z.eof

    @property
    def unused_data(self) -> bytes:
        return self._z.unused_data


_ZSTD_MAGIC = 0xFD2FB528
_BLOCK_MAX = 128 << 10  # the largest zstandard block, compressed or not


class _ZstdFrame:
    """One zstandard frame, fed to the decoder one block at a time.

    zstandard's decompressobj has no output bound, and a few bytes of RLE block decode to 128 KiB:
    feeding it whole blocks keeps every call to at most one block's output. Walking the block
    headers also tells a frame cut short (which the library's stream reader passes in silence).
    """

    step = STEP

    def __init__(self) -> None:
        try:
            import zstandard
        except ImportError:
            raise Problem("unreadable", "zstandard-compressed, and the zstandard package is not installed "
                                        "(pip install 'callstitch[zstd]')") from None
        self._decoder = zstandard.ZstdDecompressor().decompressobj()
        self._input = bytearray()
        self._stage = "magic"   # magic -> header -> block ... -> checksum -> done; or skip
        self._checksum = False
        self._skip = 0          # bytes of a skippable frame still to drop
        self.eof = False
        self.unused_data = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        self._input += data
        out = []
        made = 0
        while made < max_length and not self.eof:
            unit = self._next_unit()
            if unit is None:
                break
            if unit:
                chunk = self._decoder.decompress(unit)
                if chunk:
                    out.append(chunk)
                    made += len(chunk)
        if self.eof:
            self.unused_data = bytes(self._input)
            self._input.clear()
        return b"".join(out)

    def _take(self, n: int) -> bytes | None:
        if len(self._input) < n:
            return None
        unit = bytes(self._input[:n])
        del self._input[:n]
        return unit

    def _next_unit(self) -> bytes | None:
        """Return the next whole piece to feed (b"" for one that feeds nothing), or None when short of bytes."""
        data = self._input
        stage = self._stage
        if stage == "skip":
            n = min(self._skip, len(data))
            del data[:n]
            self._skip -= n
            if self._skip:
                return None
            self.eof = True
            return b""
        if stage == "magic":
            if len(data) < 4:
                return None
            magic = int.from_bytes(data[:4], "little")
            skippable = 0x184D2A50 <= magic <= 0x184D2A5F
            if magic != _ZSTD_MAGIC and not skippable:
                raise ValueError(f"not a zstandard frame (it starts {bytes(data[:4])!r})")
            if len(data) < 8:
                return None
            if skippable:  # its size, then bytes to drop
                self._skip = int.from_bytes(data[4:8], "little")
                del data[:8]
                self._stage = "skip"
                return b""
            descriptor = data[4]
            single = descriptor >> 5 & 1
            self._checksum = bool(descriptor >> 2 & 1)
            size = (5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
                    + ((1 if single else 0), 2, 4, 8)[descriptor >> 6])
            unit = self._take(size)
            if unit is not None:
                self._stage = "block"
            return unit
        if stage == "block":
            if len(data) < 3:
                return None
            header = int.from_bytes(data[:3], "little")
            kind, size = header >> 1 & 3, header >> 3
            if kind == 3 or size > _BLOCK_MAX:
                raise ValueError("a corrupt block header")
            unit = self._take(3 + (1 if kind == 1 else size))
            if unit is not None and header & 1:  # the frame's last block
                self._stage = "checksum" if self._checksum else "done"
            if self._stage == "done":
                self.eof = True
            return unit
        unit = self._take(4)  # the checksum
        if unit is not None:
            self._stage = "done"
            self.eof = True
        return unit


_MEMBERS: dict[str, Callable[[], Any]] = {"gzip": _GzipMember, "bzip2": bz2.BZ2Decompressor,
                                          "xz": lzma.LZMADecompressor, "zstd": _ZstdFrame}
_MEMBER_NAME = {"gzip": "member", "bzip2": "stream", "xz": "stream", "zstd": "frame"}


class Decompressed:
    """A reader of a compressed file, decompressed; what decodes before any damage is handed out first.

    Corrupt data, or an end cut inside a member (a capture still being written), raises Problem
    at the read after the last good bytes, naming the decompressed offset where they stop.
    After that the reader is at its end. Members, streams and frames back to back are read in
    turn; zero bytes after one are padding.
    """

    def __init__(self, raw: BinaryIO, compression: str) -> None:
        self._raw = raw
        self._compression = compression
        self._decoder = _MEMBERS[compression]()
        self._fed = 0             # compressed bytes given to the current member's decoder
        self._compressed = 0      # compressed bytes read in all
        self._input = b""         # compressed bytes read, not yet given to a decoder
        self._ready = b""         # decoded bytes not yet handed out
        self._problem: Problem | None = None
        self._done = False
        self.position = 0         # decompressed bytes handed out

    def read(self, n: int = -1) -> bytes:
        """Return up to n decompressed bytes (all with n < 0); b"" at the end."""
        want = (1 << 62) if n is None or n < 0 else n
        parts = []
        got = 0
        step = getattr(self._decoder, "step", STEP)
        while got < want:
            chunk = self._next(min(want - got, step))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
            self.position += len(chunk)
        if not parts and self._problem is not None:
            problem, self._problem = self._problem, None
            raise problem
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, view: Any) -> int:
        """Fill a writable buffer with decompressed bytes (no joined copy); return how many."""
        want = len(view)
        got = 0
        step = getattr(self._decoder, "step", STEP)
        while got < want:
            chunk = self._next(min(want - got, step))
            if not chunk:
                break
            view[got:got + len(chunk)] = chunk
            got += len(chunk)
            self.position += len(chunk)
        if not got and self._problem is not None:
            problem, self._problem = self._problem, None
            raise problem
        return got

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._input = self._ready = b""
        self._done = True

    def _next(self, limit: int) -> bytes:
        """Return up to limit decoded bytes; b"" at the end or at damage (then self._problem says which)."""
        if self._ready:
            chunk, self._ready = self._ready[:limit], self._ready[limit:]
            return chunk
        while not self._done:
            if self._decoder.eof:  # a member ended: the next one starts with what is left
                self._input = self._decoder.unused_data + self._input
                self._decoder = _MEMBERS[self._compression]()
                self._fed = 0
            data, self._input = self._input, b""
            if not self._fed:
                data = data.lstrip(b"\0")  # padding between or after members
            self._fed += len(data)
            try:
                out = self._decoder.decompress(data, limit)
            except _Damage as exc:
                out = exc.good
                self._fail("is corrupt", exc, len(out))
            except DECOMPRESSION_ERRORS as exc:
                return self._fail("is corrupt", exc)
            if out:
                if len(out) > limit:
                    out, self._ready = out[:limit], out[limit:]
                return out
            if self._done:
                break
            if not self._decoder.eof and not self._fill():
                self._done = True
                if self._fed:
                    return self._fail(f"ends inside a {_MEMBER_NAME[self._compression]} (cut short, or still "
                                      "being written)", None)
        return b""

    def _fill(self) -> bool:
        """Read more compressed bytes; return False at the end of the file."""
        try:
            data = self._raw.read(PIECE)
        except OSError as exc:
            self._problem = Problem("unreadable", f"cannot read: {exc.strerror or exc}", self.position)
            return False
        self._compressed += len(data)
        self._input += data
        return bool(data)

    def _fail(self, what: str, exc: BaseException | None, good: int = 0) -> bytes:
        """Note the damage (good: bytes decoded before it, still to be handed out); return b""."""
        if self._problem is None:
            at = self.position + len(self._ready) + good
            why = f" ({exc})" if exc is not None and str(exc) else ""
            self._problem = Problem("corrupt archive", f"the {self._compression} data {what}{why} after {at} "
                                    f"decompressed bytes ({self._compressed} compressed bytes read); the bytes "
                                    "before are read", at)
        self._done = True
        return b""


def wrap(raw: BinaryIO, compression: str | None) -> BinaryIO:
    """Return a reader that decompresses raw as it is read."""
    if compression is None:
        return raw
    return Decompressed(raw, compression)  # type: ignore[return-value]


class _Peeked:
    """A reader that first gives back the bytes already read to sniff it."""

    def __init__(self, head: bytes, raw: BinaryIO, owned: bool = False) -> None:
        self._head = head
        self._raw = raw
        self._owned = owned  # close raw too (a FIFO opened here; never standard input)

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
        if self._owned:
            self._raw.close()


def open_source(path: str) -> tuple[BinaryIO, str | None, BinaryIO]:
    """Open a source; return (decompressed reader, compression, the underlying file).

    Raises Problem when the file cannot be opened.
    """
    if path == STDIN:
        import sys
        if sys.stdin is None:  # (started with it closed: <&-)
            raise Problem("unreadable", "standard input is closed")
        raw: BinaryIO = sys.stdin.buffer
        try:
            head = raw.read(6)
        except OSError as exc:  # (a descriptor 0 that is no longer open, say)
            raise Problem("unreadable", exc.strerror or str(exc)) from None
        compression = sniff_compression(head)
        peeked = _Peeked(head, raw)
        return wrap(peeked, compression), compression, peeked  # type: ignore[arg-type, return-value]
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise Problem("unreadable", exc.strerror or str(exc)) from None
    try:
        head = raw.read(6)
    except OSError as exc:
        raw.close()
        raise Problem("unreadable", exc.strerror or str(exc)) from None
    compression = sniff_compression(head)
    if not raw.seekable():  # a FIFO or a device named on the command line: read as a stream
        peeked = _Peeked(head, raw, owned=True)
        return wrap(peeked, compression), compression, peeked  # type: ignore[arg-type, return-value]
    raw.seek(0)
    return wrap(raw, compression), compression, raw
