"""Coverage-guided fuzzing of the batch layer (reassemble_many) with atheris.

Each input picks a container (the body as it is, gzip, bzip2, xz, zstandard, a HAR file, a JSON
lines log), a cut or a few flipped bytes of the result, and a range size; the file is written
to a temporary directory and read by reassemble_many on both twins, whole and cut into range
tasks. The target fails on an exception, the twins disagreeing, or the range cut changing the
records. Run it (see fuzz/README.md):

    python fuzz/fuzz_batch.py fuzz/corpus-batch fuzz/seeds -max_total_time=600
"""

import base64
import bz2
import gzip
import lzma
import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["callstitch"]):
    import callstitch
    from callstitch import _accumulator_c, _accumulator_py
    from callstitch._batch import settings as _batch

try:
    import zstandard
except ImportError:  # the extra is optional: the target then skips that container
    zstandard = None

import orjson

CONTAINERS = ("plain", "gzip", "bzip2", "xz", "zstd", "har", "jsonl")
LIMITS = callstitch.Limits(call_bytes=4096, stream_bytes=16384, calls=16, choices=4, event_bytes=2048)
# Each input's file goes to a directory made and removed for it (libFuzzer's exit runs no atexit).
TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None


def pack(container, body):
    """Return (file name, file bytes, field) holding body in a container."""
    if container == "gzip":
        return "capture.sse.gz", gzip.compress(body, 1), None
    if container == "bzip2":
        return "capture.sse.bz2", bz2.compress(body, 1), None
    if container == "xz":
        return "capture.sse.xz", lzma.compress(body, preset=0), None
    if container == "zstd" and zstandard is not None:
        return "capture.sse.zst", zstandard.ZstdCompressor(write_checksum=True).compress(body), None
    if container == "har":
        content = {"mimeType": "text/event-stream", "text": body.decode("utf-8", "replace")}
        if body[:1] == b"\x00":
            content = {"mimeType": "application/vnd.amazon.eventstream", "encoding": "base64",
                       "text": base64.b64encode(body).decode()}
        return "session.har", orjson.dumps({"log": {"entries": [{"response": {"content": content}}]}}), None
    if container == "jsonl":
        lines = [orjson.dumps({"response": {"body": part.decode("utf-8", "replace")}})
                 for part in body.split(b"\n\n\n")]
        return "log.jsonl", b"\n".join(lines) + b"\n", "response.body"
    return "capture.sse", body, None


def records(path, field, impl, limits):
    """Return the records and problems of one file, read by one twin in this process."""
    _batch.Accumulator = impl.Accumulator
    problems = []
    out = list(callstitch.reassemble_many([path], field=field, limits=limits,
                                          on_problem=lambda *a: problems.append(a[2:])))
    return out, problems


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    container = CONTAINERS[fdp.ConsumeIntInRange(0, len(CONTAINERS) - 1)]
    damage = fdp.ConsumeIntInRange(0, 2)             # 0 none, 1 cut, 2 flip a few bytes
    where = [fdp.ConsumeIntInRange(0, 1 << 20) for _ in range(fdp.ConsumeIntInRange(1, 4))]
    range_bytes = fdp.ConsumeIntInRange(64, 1 << 16)
    limits = LIMITS if fdp.ConsumeBool() else None
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    name, blob, field = pack(container, body)
    if damage == 1 and blob:
        blob = blob[:where[0] % len(blob)]
    elif damage == 2 and blob:
        buf = bytearray(blob)
        for w in where:
            buf[w % len(buf)] ^= 0x5A
        blob = bytes(buf)
    with tempfile.TemporaryDirectory(prefix="callstitch-fuzz-batch-", dir=TMP) as workdir:
        path = os.path.join(workdir, name)
        with open(path, "wb") as f:
            f.write(blob)
        check(container, path, field, range_bytes, limits)


def check(container, path, field, range_bytes, limits):
    """Read one file on both twins, whole and in range tasks; raise on any difference."""
    saved = _batch.Accumulator, _batch.RANGE, _batch.LOOKBACK
    try:
        c = records(path, field, _accumulator_c, limits)
        py = records(path, field, _accumulator_py, limits)
        if c != py:
            raise AssertionError(f"twins disagree on {container}:\nc:  {c!r}\npy: {py!r}")
        _batch.RANGE = range_bytes  # (LOOKBACK as it is: the cuts agree for events shorter than it)
        ranged = records(path, field, _accumulator_c, limits)
        if ranged[0] != c[0]:
            raise AssertionError(f"range tasks of {range_bytes} bytes changed the records of {container}:\n"
                                 f"whole:  {c[0]!r}\nranged: {ranged[0]!r}")
    finally:
        _batch.Accumulator, _batch.RANGE, _batch.LOOKBACK = saved


def main():
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
