"""Batch reprocessing: throughput and memory of `callstitch reassemble` on gigabytes of captures.

Writes a workload to a temporary directory (responses back to back, as gateways capture them;
part of it gzipped), then measures, each CLI run in its own process tree:

- the library's own speed: ``callstitch.reassemble`` on each response, in memory;
- ``callstitch reassemble -j 1`` end to end on a plain back-to-back file (reading, splitting,
  reassembling, writing JSON lines), against that: the target is >= 70%;
- ``-j 2`` against ``-j 1`` on the same file: the target is >= 1.7x on two cores;
- the peak RSS of any process of the CLI (parent and workers) over the whole workload, plain
  and gzipped: the target is <= 300 MB.

    python benchmarks/batch.py                  # ~2 GB, a few minutes
    python benchmarks/batch.py --gigabytes 5
    python benchmarks/batch.py --quick          # ~0.3 GB
    python benchmarks/batch.py --format anthropic   # another format's responses (any of workload.FORMATS)

OpenAI chat responses end in a `[DONE]` line, which the splitter cuts at; other formats end in an
event of their own (Anthropic's `message_stop`) or in none, and are cut where the next one starts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workload  # noqa: E402

import callstitch  # noqa: E402

# Runs the CLI and reports the peak RSS of the largest process in its tree (the pool's workers
# are its children, waited for, so their usage rolls up into RUSAGE_CHILDREN).
_WRAPPER = """
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, wall, r.ru_maxrss, r.ru_utime + r.ru_stime)
"""


def cli(args: list[str]) -> tuple[int, float, float, float]:
    """Run the CLI; return (exit status, wall seconds, peak RSS in MB, CPU seconds of the tree)."""
    out = subprocess.run([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "callstitch", "reassemble",
                          "--quiet", *args], capture_output=True, text=True, check=True)
    rc, wall, rss, cpu = out.stdout.split()
    return int(rc), float(wall), int(rss) / 1024, float(cpu)


def check_cli(pairs: list[tuple[bytes, list]], root: str) -> None:
    """Stop unless the CLI gives, stream by stream, the calls each response must give (before anything is timed)."""
    path = os.path.join(root, "check.sse")
    with open(path, "wb") as f:
        f.write(b"".join(body for body, _ in pairs))
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", "--quiet", path],
                         capture_output=True, check=True).stdout
    got: dict[int, list] = {}
    for line in out.splitlines():
        record = json.loads(line)
        got.setdefault(record["stream"], []).append((record["id"], record["name"], record["arguments"]))
    expected = {k: [(c.id, c.name, c.arguments) for c in calls] for k, (_, calls) in enumerate(pairs)}
    if got != {k: v for k, v in expected.items() if v}:
        raise SystemExit(f"the CLI is WRONG on the workload: {len(got)} streams with calls, {len(pairs)} expected")
    os.remove(path)


def library_speed(bodies: list[bytes], fmt: str, seconds: float = 3.0) -> tuple[float, float]:
    """Return (MB/s of wall time, MB per CPU second) of reassemble() over the responses, best passes."""
    size = sum(map(len, bodies))
    best = best_cpu = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        t, c = time.perf_counter(), time.process_time()
        for body in bodies:
            callstitch.reassemble(body, format=fmt)
        best = max(best, size / (time.perf_counter() - t) / 1e6)
        best_cpu = max(best_cpu, size / max(time.process_time() - c, 1e-9) / 1e6)
        if time.perf_counter() > deadline:
            return best, best_cpu


def responses(fmt: str) -> list[tuple[bytes, list]]:
    """Return the 600 distinct responses the workload repeats, each with the calls it must give."""
    return workload.responses(600, seed=5) if fmt == "openai-chat" else workload.format_responses(fmt, 600, seed=5)


def write_workload(root: str, gigabytes: float, pairs: list[tuple[bytes, list]]) -> tuple[str, list[bytes], int]:
    """Write the workload; return (the plain back-to-back file, the responses, total bytes)."""
    bodies = [b for b, _ in pairs]
    blob = b"".join(bodies)
    total = int(gigabytes * 1e9)
    plain_share = int(total * 0.7)
    big = os.path.join(root, "gateway-capture.sse")
    written = 0
    with open(big, "wb") as f:
        while written < plain_share:
            f.write(blob)
            written += len(blob)
    compressed = gzip.compress(blob, compresslevel=1)
    i = 0
    while written < total:
        with open(os.path.join(root, f"day-{i:03d}.sse.gz"), "wb") as f:
            f.write(compressed)
        written += len(blob)
        i += 1
    return big, bodies, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=2.0, help="workload size (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="0.3 GB")
    parser.add_argument("--format", default="openai-chat", choices=["openai-chat", *workload.FORMATS],
                        help="the responses' wire format (default: %(default)s)")
    parser.add_argument("--dir", help="where to write the workload (default: a temporary directory)")
    args = parser.parse_args()
    gigabytes = 0.3 if args.quick else args.gigabytes
    root = tempfile.mkdtemp(prefix="callstitch-batch-", dir=args.dir)
    try:
        print(f"callstitch {callstitch.__version__} ({callstitch.IMPLEMENTATION}), Python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cores")
        t = time.perf_counter()
        pairs = responses(args.format)
        check_cli(pairs, root)
        big, bodies, total = write_workload(root, gigabytes, pairs)
        big_size = os.path.getsize(big)
        print(f"workload: {total / 1e9:.2f} GB of responses ({len(bodies)} distinct, "
              f"{sum(map(len, bodies)) / len(bodies) / 1e3:.0f} KB each) in {root}, "
              f"written in {time.perf_counter() - t:.1f} s; the plain file: {big_size / 1e9:.2f} GB")

        (named, named_cpu), (auto, auto_cpu) = library_speed(bodies, args.format), library_speed(bodies, "auto")
        # Wall-clock figures suffer from anything else running; MB per CPU second does not.
        print(f"\n{'measure':<44} {'MB/s':>7} {'ratio':>6} {'MB/cpu-s':>9} {'ratio':>6}  target")
        print(f"{f'library reassemble(format={args.format})':<44} {named:7.0f} {'':>6} {named_cpu:9.0f}")
        print(f"{'library reassemble(format=auto)':<44} {auto:7.0f} {'':>6} {auto_cpu:9.0f}")
        # The library's figures are its best passes: give the CLI the best of three runs as well.
        rc, wall1, rss1, cpu1 = min((cli(["-j", "1", big]) for _ in range(3)), key=lambda r: r[1])
        j1, j1_cpu = big_size / wall1 / 1e6, big_size / cpu1 / 1e6
        print(f"{f'CLI -j 1, end to end, vs {args.format}':<44} {j1:7.0f} {j1 / named:6.2f} {j1_cpu:9.0f} "
              f"{j1_cpu / named_cpu:6.2f}  >= 0.70")
        print(f"{'CLI -j 1, end to end, vs auto':<44} {j1:7.0f} {j1 / auto:6.2f} {j1_cpu:9.0f} "
              f"{j1_cpu / auto_cpu:6.2f}  >= 0.70")
        rc, wall2, rss2, cpu2 = min((cli(["-j", "2", big]) for _ in range(3)), key=lambda r: r[1])
        j2 = big_size / wall2 / 1e6
        print(f"{'CLI -j 2 vs -j 1 (wall clock)':<44} {j2:7.0f} {j2 / j1:6.2f} {'':>9} {'':>6}  >= 1.70")
        print(f"  (CPU seconds: -j 1 {cpu1:.2f}, -j 2 {cpu2:.2f}; load average before: "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")

        rc, wall, rss, _ = cli([root])
        print(f"\nwhole workload, all cores: {total / 1e9:.2f} GB in {wall:.1f} s "
              f"({total / wall / 1e6:.0f} MB/s), exit {rc}")
        print(f"peak RSS of any CLI process: {rss:.0f} MB (whole workload); "
              f"{rss1:.0f} MB (-j 1), {rss2:.0f} MB (-j 2) on the plain file   target <= 300 MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
