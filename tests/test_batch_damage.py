"""Damaged and awkward inputs of the batch layer: archives cut short or corrupt, files that shrink
while read, FIFOs and symlink loops in walked trees, log lines past the limits.

Everything runs for real: real archives made with the standard library (and zstandard), real
files truncated by a second process, real FIFOs and symlinks, the real CLI in a subprocess.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import zlib

import orjson
import pytest

import callstitch
from callstitch._batch import settings, task, worker

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch machinery (in this process) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def cli(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], input=stdin,
                          capture_output=True, timeout=timeout)


def one_call_body(i: int) -> bytes:
    """Return an OpenAI chat response with exactly one call, numbered i."""
    args = orjson.dumps({"n": i, "text": "x" * (i % 50)}).decode()
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": f"call_{i}", "type": "function",
                                                                  "function": {"name": "f", "arguments": ""}}]}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args[j:j + 7]}}]}}]}
               for j in range(0, len(args), 7)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def bodies(n: int = 60, seed: int = 1) -> list[bytes]:
    return [b for b, _ in workload.responses(n, seed=seed)]


def records_of(path: str, **kw) -> tuple[list[dict], list[tuple]]:
    """Return the records (without their source) and the problems of one source."""
    problems: list[tuple] = []
    records = [{k: v for k, v in r.items() if k != "source"}
               for r in callstitch.reassemble_many([path], on_problem=lambda *a: problems.append(a), **kw)]
    return records, problems


def plain_records(tmp_path, data: bytes) -> list[dict]:
    path = tmp_path / "plain-reference.sse"
    path.write_bytes(data)
    return records_of(str(path))[0]


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


def _zstd_prefix(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


# compress, the decodable prefix of a cut archive by a reference decoder, how far short of that
# prefix a read may stop (zstandard decodes whole blocks: up to 128 KiB)
CODECS = {
    "gzip": (gzip.compress, lambda d: zlib.decompressobj(31).decompress(d), 0),
    "bzip2": (bz2.compress, lambda d: bz2.BZ2Decompressor().decompress(d), 0),
    "xz": (lzma.compress, lambda d: lzma.LZMADecompressor().decompress(d), 0),
    "zstd": (_zstd, _zstd_prefix, 128 << 10),
}


# -- 1. archives cut short or corrupt ------------------------------------------------------------

def test_gzip_missing_only_its_trailer_keeps_every_call(twin, tmp_path):
    # A capture still being written: everything is there but the 8-byte trailer (CRC and length).
    blob = b"".join(one_call_body(i) for i in range(400))
    path = tmp_path / "live.sse.gz"
    path.write_bytes(gzip.compress(blob)[:-8])
    records, problems = records_of(str(path))
    assert len(records) == 400
    assert records == plain_records(tmp_path, blob)
    (problem,) = problems
    assert problem[0] == str(path) and problem[3] == len(blob) and problem[4] == "corrupt archive"
    assert "gzip data ends inside a member" in problem[5]


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("keep", [0.3, 0.77, 0.999])
def test_cut_archive_keeps_all_that_decodes(twin, tmp_path, codec, keep):
    compress, reference, granularity = CODECS[codec]
    blob = b"".join(bodies())
    packed = compress(blob)
    cut = packed[:int(len(packed) * keep)]
    path = tmp_path / f"cut.sse.{codec}"
    path.write_bytes(cut)
    records, problems = records_of(str(path))
    damage = [p for p in problems if p[4] == "corrupt archive"]
    assert len(damage) == 1, problems
    at = damage[0][3]
    decodable = len(reference(cut))
    assert decodable - granularity <= at <= decodable
    assert f"the {codec} data ends inside a" in damage[0][5]
    # Exactly the streams of the bytes before the damage: as if the file held just those.
    assert records == plain_records(tmp_path, blob[:at])


@pytest.mark.parametrize("codec", ["gzip", "bzip2", "xz"])
@pytest.mark.parametrize("kind", ["body", "log"])
def test_a_small_archive_cut_short_keeps_all_that_decodes(twin, tmp_path, codec, kind):
    # Under the 4 KiB the batch peeks at to tell what a file holds: the damage is met while the head
    # is read or filled up, and must still come after every byte that decoded before it.
    compress, reference, _ = CODECS[codec]
    if kind == "body":
        whole = b"".join(one_call_body(i) for i in range(3))
    else:  # a JSON-lines log: its first line is peeked whole to tell a log from an NDJSON body
        whole = b"".join(orjson.dumps({"response": one_call_body(i).decode()}) + b"\n" for i in range(3))
    # A second member (stream) being written after the first: bzip2 decodes nothing of a block cut short.
    more = compress(one_call_body(3) if kind == "body" else orjson.dumps({"response": one_call_body(3).decode()}))
    cut = compress(whole) + more[:len(more) // 2]
    decodable = whole + reference(more[:len(more) // 2])
    assert len(decodable) < 4096
    path = tmp_path / f"small.{codec}"
    path.write_bytes(cut)
    field = {"field": "response"} if kind == "log" else {}
    records, problems = records_of(str(path), **field)
    damage = [p for p in problems if p[4] == "corrupt archive"]
    assert len(damage) == 1 and damage[0][3] == len(decodable), problems
    plain = tmp_path / "plain-reference"
    plain.write_bytes(decodable)
    assert records == records_of(str(plain), **field)[0]
    assert len(records) >= 2


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_small_gzip_cut_short_through_the_cli(tmp_path):
    # The CLI's path to the same promise: what decoded before the damage is read, then the damage reported.
    whole = b"".join(one_call_body(i) for i in range(3))
    path = tmp_path / "small.sse.gz"
    path.write_bytes(gzip.compress(whole) + gzip.compress(one_call_body(3))[:40])
    proc = cli(str(path))
    records = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in records] == [f"call_{i}" for i in range(3)]
    assert b"corrupt archive" in proc.stderr


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_corrupt_gzip_member_through_the_cli(tmp_path):
    # A good member, then one with a valid header and bad deflate data: the first member's calls
    # come out, the damage is reported with the file and the offset, and no traceback.
    good = b"".join(bodies(20))
    bad_member = gzip.compress(b"".join(bodies(5, seed=2)))[:10] + bytes(range(7, 250)) * 8
    path = tmp_path / "day.sse.gz"
    path.write_bytes(gzip.compress(good) + bad_member)
    after = tmp_path / "after.sse"
    after.write_bytes(one_call_body(7))
    proc = cli(str(path), str(after), "-j", "1")
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "zlib.error" not in err
    assert f"{path} (byte {len(good)}): corrupt archive: the gzip data is corrupt" in err
    got = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [r for r in got if r["source"] == str(path)] == [
        {"source": str(path), **r} for r in plain_records(tmp_path, good)]
    assert [r["id"] for r in got if r["source"] == str(after)] == ["call_7"]


def test_damage_inside_a_deflate_member_keeps_what_precedes_it(twin, tmp_path):
    blob = b"".join(bodies())
    packed = bytearray(gzip.compress(blob))
    middle = len(packed) // 2
    packed[middle:middle + 40] = bytes(40)  # zeros inside deflate data: an error at or soon after them
    path = tmp_path / "flipped.sse.gz"
    path.write_bytes(bytes(packed))
    # The reference: a decoder fed one byte at a time, up to the error.
    ref, z = [], zlib.decompressobj(31)
    for i in range(len(packed)):
        try:
            ref.append(z.decompress(bytes(packed[i:i + 1])))
        except zlib.error:
            break
    decodable = b"".join(ref)
    records, problems = records_of(str(path))
    (damage,) = [p for p in problems if p[4] == "corrupt archive"]
    at = damage[3]
    assert len(decodable) - (64 << 10) < at <= len(decodable)
    assert records == plain_records(tmp_path, decodable[:at])


# -- 2. a file truncated while it is read ---------------------------------------------------------

def _reading(path: str) -> bool:
    """Tell whether a process has path memory-mapped, or open and read past its first 8 MiB."""
    real = os.path.realpath(path)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as maps:
                if real in maps.read():
                    return True
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == real:
                    with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                        if int(info.readline().split()[1]) > 8 << 20:
                            return True
        except (OSError, ValueError, IndexError):
            continue  # the process or the descriptor went away
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/fdinfo"), reason="needs /proc to see the reader at work")
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_file_truncated_while_read(tmp_path, jobs):
    # Log rotation by copytruncate: the file is cut to 1 MiB while the CLI is in the middle of it.
    # Memory-mapped, that was a SIGBUS ("Bus error"; with -j 2 a BrokenProcessPool and 0 lines).
    parts = bodies(300, seed=3)
    blob = b"".join(parts)
    path = tmp_path / "gateway.sse"
    with open(path, "wb") as f:
        while f.tell() < 200 << 20:
            f.write(blob)
    size = path.stat().st_size
    keep = 1 << 20
    env = {**os.environ, "CALLSTITCH_RANGE_BYTES": str(256 << 20 if jobs == "1" else 32 << 20)}
    proc = subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", str(path), "-j", jobs],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        while proc.poll() is None and not _reading(str(path)):
            pass
        os.truncate(path, keep)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    text = err.decode()
    assert proc.returncode == 1, text  # not -7 (SIGBUS)
    assert "Traceback" not in text and "Bus error" not in text
    assert text.count(f"{path} (byte {keep}): file shrank from {size} to {keep} bytes while it was read") == 1
    assert "1 file shrank" in text  # reported once, whatever the number of tasks that saw it
    got = [orjson.loads(line) for line in out.splitlines()]
    whole = plain_records(tmp_path, blob)
    inside = max(i for i in range(len(parts) + 1) if sum(map(len, parts[:i])) <= keep)
    first = [r for r in whole if r["stream"] < inside]  # the streams inside the bytes kept: all there, in order
    assert first
    assert [{k: v for k, v in r.items() if k != "source"} for r in got[:len(first)]] == first


# -- 4. FIFOs, devices and symlink loops ----------------------------------------------------------

def _tree_with_traps(tmp_path):
    """A capture tree with a FIFO named like a capture, a link to a file, and links back up."""
    root = tmp_path / "captures"
    (root / "day1").mkdir(parents=True)
    (root / "day1" / "a.sse").write_bytes(one_call_body(1))
    (root / "day1" / "b.sse.gz").write_bytes(gzip.compress(one_call_body(2)))
    os.mkfifo(root / "day1" / "live.sse")      # a gateway's tap: nobody writes to it
    os.symlink(root / "day1" / "a.sse", root / "latest.sse")
    os.symlink(".", root / "day1" / "again")   # a link to its own directory
    os.symlink("..", root / "day1" / "up")     # and one to its parent: two loops
    return root


@pytest.mark.parametrize("how", ["directory", "glob"])
def test_walking_takes_each_regular_file_once(tmp_path, how):
    root = _tree_with_traps(tmp_path)
    target = str(root) if how == "directory" else str(root / "**" / "*.sse*")
    proc = cli(target, "-j", "2", timeout=30)  # a FIFO opened, or the loops followed, never end
    assert proc.returncode == 0, proc.stderr
    got = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert sorted(r["id"] for r in got) == ["call_1", "call_2"]


@pytest.mark.parametrize("pattern", ["**", "**/*", "*"])
def test_a_glob_never_walks_a_link_to_a_directory_outside(tmp_path, pattern):
    # Found by a hostile probe: 'top/**' matched the link top/ext itself, and the directory it
    # matched was then walked: a file outside the tree was read.
    (tmp_path / "top").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "top" / "own.sse").write_bytes(one_call_body(1))
    (tmp_path / "outside" / "foreign.sse").write_bytes(one_call_body(2))
    os.symlink(tmp_path / "outside", tmp_path / "top" / "ext")
    sources = [s for s, p in callstitch._batch.sources.expand([str(tmp_path / "top" / pattern)]) if p is None]
    assert sources == [str(tmp_path / "top" / "own.sse")]


def test_dedupe_and_order_of_walked_files(tmp_path):
    root = _tree_with_traps(tmp_path)
    sources = [s for s, p in callstitch._batch.sources.expand([str(root), str(root / "day1" / "a.sse")]) if p is None]
    assert sources == [str(root / "latest.sse"), str(root / "day1" / "b.sse.gz")]
    # A file named twice is read once; a FIFO found by a glob is not opened.
    globbed = [s for s, p in callstitch._batch.sources.expand([str(root / "day1" / "*.sse")]) if p is None]
    assert globbed == [str(root / "day1" / "a.sse")]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_named_pipe_on_the_command_line_is_read(tmp_path):
    # callstitch reassemble <(zcat day.sse.gz): the shell passes /dev/fd/N, a pipe.
    data = gzip.compress(b"".join(one_call_body(i) for i in range(30)))
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", f"/dev/fd/{read_end}", "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(read_end,))
    os.close(read_end)
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(data)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [orjson.loads(line)["id"] for line in out.splitlines()] == [f"call_{i}" for i in range(30)]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_named_fifo_on_the_command_line_is_read(tmp_path):
    fifo = tmp_path / "tap.sse"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", str(fifo), "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "wb") as pipe:  # opens once the CLI opens its end
        pipe.write(b"".join(one_call_body(i) for i in range(5)))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [orjson.loads(line)["id"] for line in out.splitlines()] == [f"call_{i}" for i in range(5)]


# -- 6. a log line past the limit -----------------------------------------------------------------

def _log_with_a_long_line(path, long_bytes: int) -> list[bytes]:
    """Write a log: a good line, one of long_bytes, two good lines; return the good bodies."""
    good = [one_call_body(i) for i in range(3)]
    with open(path, "wb") as f:
        f.write(orjson.dumps({"body": good[0].decode()}) + b"\n")
        f.write(b'{"body": "data: ' + b"x" * long_bytes + b'"}\n')
        f.write(orjson.dumps({"body": good[1].decode()}) + b"\n")
        f.write(orjson.dumps({"body": good[2].decode()}))  # the last line has no newline
    return good


def test_an_over_limit_log_line_is_dropped_as_it_streams(twin, tmp_path, monkeypatch):
    import tracemalloc
    path = tmp_path / "log.jsonl"
    _log_with_a_long_line(path, 40 << 20)
    monkeypatch.setattr(settings, "BLOCK", 1 << 20)
    problems: list = []
    tracemalloc.start()
    try:
        got = list(callstitch.reassemble_many([str(path)], field="body", limits=callstitch.Limits(event_bytes=1 << 20),
                                              on_problem=lambda *a: problems.append(a)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Held: a block or two and the limit, not the 40 MiB line (nor the copies of it, block by block).
    assert peak < 8 << 20, peak
    assert [(r["stream"], r["id"]) for r in got] == [(0, "call_0"), (2, "call_1"), (3, "call_2")]
    first = len(orjson.dumps({"body": one_call_body(0).decode()})) + 1
    assert problems == [(str(path), "line", 1, first, "limit",
                         "Limits.event_bytes (1 MiB) exceeded by a log line; the log line is dropped")]


def _peak_rss_mb(*args: str, env: dict | None = None) -> tuple[int, float, bytes]:
    """Run the CLI in a child; return (exit status, peak RSS in MB of its processes, stderr)."""
    wrapper = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
               "stderr=subprocess.PIPE); sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
               " + ' ' + str(p.returncode) + '\\n'); sys.stdout.flush(); sys.stdout.buffer.write(p.stderr)")
    out = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "callstitch", "reassemble", *args],
                         capture_output=True, timeout=300, check=True, env={**os.environ, **(env or {})}).stdout
    head, err = out.split(b"\n", 1)
    rss, rc = head.split()
    return int(rc), int(rss) / 1024, err


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_quarter_gigabyte_log_line_through_the_cli(tmp_path):
    # 256 MiB of line in a 250 KB gzip: the old reader joined it block by block (quadratic) and held
    # it whole before the 64 MiB event_bytes limit could see it.
    path = tmp_path / "log.jsonl.gz"
    good = [one_call_body(i) for i in range(2)]
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(orjson.dumps({"body": good[0].decode()}) + b"\n")
        f.write(b'{"body": "data: ')
        for _ in range(256):
            f.write(b"x" * (1 << 20))
        f.write(b'"}\n')
        f.write(orjson.dumps({"body": good[1].decode()}) + b"\n")
    rc, rss, err = _peak_rss_mb(str(path), "--field", "body", "-j", "1")
    assert rss < 200, rss  # the limit (64 MiB) and a base; the old reader peaked at 1.5 GB
    assert rc == 1, err
    assert f"{path} (line 2, byte ".encode() in err
    assert b"limit: Limits.event_bytes (64 MiB) exceeded by a log line; the log line is dropped" in err
    assert b"2 calls" in err


# -- 7. memory of the CLI with a large call -------------------------------------------------------

def big_call_body(size: int, fragment: int = 4096) -> tuple[bytes, int]:
    """Return an OpenAI chat response with one call of about size argument bytes (ASCII code), and its size."""
    unit = 'def handler(event, context):\n    return {"status": 200, "body": event["x"]}  # tab\there\n' * 64
    text = unit * (size // len(unit) + 1)
    args = orjson.dumps({"path": "handler.py", "content": text[:size]}).decode()
    events = [{"index": 0, "id": "call_big", "type": "function", "function": {"name": "write_file", "arguments": ""}}]
    events += [{"index": 0, "function": {"arguments": args[i:i + fragment]}} for i in range(0, len(args), fragment)]
    body = b"".join(b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [e]}}]}) + b"\n\n"
                    for e in events)
    return body + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n', \
        len(args)


@pytest.mark.parametrize("twin_name", ["c", "py"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cli_memory_is_bounded_by_four_times_the_largest_call(tmp_path, twin_name, jobs):
    # The raw bytes, the parsed arguments and the record's line are each about the call's size;
    # the record was then copied twice more to put its source in front (6x: 205 MB for this call).
    body, size = big_call_body(30 << 20)
    path = tmp_path / "big.sse"
    path.write_bytes(body)
    env = {"CALLSTITCH_NO_EXTENSIONS": "1"} if twin_name == "py" else {}
    rc, rss, err = _peak_rss_mb(str(path), "-j", jobs, "--max-call-bytes", "0", "--max-stream-bytes", "0", env=env)
    assert rc == 0, err
    assert b"1 call" in err
    base = 40  # MB: the interpreter, orjson, callstitch and a block
    assert rss <= 4 * size / 2**20 + base, (rss, size)


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_small_records_are_held_compactly(tmp_path):
    # The lines of a whole task wait for its end; each small one is a compact copy, never a view
    # of orjson's buffer (several times the line: 94 MB held for 3.5 MB of lines when they were).
    # The batch layer's own holding: one twin will do (the pure one under tracemalloc takes minutes).
    import tracemalloc
    path = tmp_path / "many.sse.gz"
    path.write_bytes(gzip.compress(b"".join(one_call_body(i) for i in range(20000)), 1))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        outcome = worker.run_task(task.Task(str(path), "auto", "auto", None, None, 0, None, size, planned=size))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.calls == 20000
    assert peak < 4 * len(outcome.lines) + (8 << 20), (peak, len(outcome.lines))
