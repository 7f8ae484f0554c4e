"""A/B of two builds of callstitch: the calls-only throughput of every wire format, B over A.

usage: python benchmarks/ab.py SRC_A SRC_B [--rounds R] [--pairs P] [--formats FMT,FMT] [--scale S]
                               [--b-job calls|turn]

SRC_A and SRC_B are two src/ folders, each with its compiled twin built in place
(`python setup.py build_ext --inplace` in its checkout). Each round starts one fresh worker
process per build (so the memory layout one process happens to get does not bias its build for
the whole run), then, per format, times P pairs of passes of `reassemble(body, format).tool_calls`
over the same workload, alternating which build goes first; the round's ratio is the best pass
of B over the best pass of A. The table gives the median and the range of the rounds' ratios.
Why so: on a shared 2-core VM one pass can vary by 30% with no code change, and a process keeps
its own speed for its lifetime, while adjacent passes of two live workers see the same machine.
Run an A/A (the same folder twice) first to learn the noise of the machine.

--b-job turn times `reassemble(body, format).to_response()` in B instead (A stays calls-only):
issue 20's "the whole turn at 0.8x or more of today's calls-only throughput", today being A.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL = ("openai-chat", "openai-responses", "anthropic", "gemini", "bedrock", "cohere", "ollama")
CHAT_RESPONSES = 300  # the other formats: compare.py --formats' counts (each pass some 20-80 ms here)


def make_workload(path: Path, formats: list[str], scale: float) -> None:
    """Write the bodies of every format's workload to path (one pickle both builds read)."""
    sys.path.insert(0, str(HERE))
    import workload
    from compare import FORMAT_RESPONSES

    bodies = {}
    for fmt in formats:
        n = max(10, int((CHAT_RESPONSES if fmt == "openai-chat" else FORMAT_RESPONSES[fmt]) * scale))
        made = workload.responses(n) if fmt == "openai-chat" else workload.format_responses(fmt, n)
        bodies[fmt] = [body for body, _ in made]
    path.write_bytes(pickle.dumps(bodies))


def worker(bodies_path: str, job: str) -> None:
    """Serve timing requests: a format name a line in, the seconds of one pass of job over its bodies out."""
    import callstitch

    bodies = pickle.loads(Path(bodies_path).read_bytes())
    print(callstitch.__file__, flush=True)
    for line in sys.stdin:
        fmt = line.strip()
        started = time.perf_counter()
        if job == "turn":
            for body in bodies[fmt]:
                callstitch.reassemble(body, format=fmt).to_response()
        else:
            for body in bodies[fmt]:
                callstitch.reassemble(body, format=fmt).tool_calls
        print(time.perf_counter() - started, flush=True)


class Worker:
    """One live timing process running one build."""

    def __init__(self, src: str, bodies_path: Path, job: str = "calls") -> None:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src), PYTHONHASHSEED="0")
        env.pop("CALLSTITCH_NO_EXTENSIONS", None)
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(bodies_path), "--job", job], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        where = self.proc.stdout.readline().strip()
        if not where.startswith(os.path.abspath(src)):
            raise SystemExit(f"the build in {src} did not load (callstitch came from {where or 'nowhere'})")

    def time(self, fmt: str) -> float:
        self.proc.stdin.write(fmt + "\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def run(a: str, b: str, formats: list[str], rounds: int, pairs: int, bodies_path: Path,
        b_job: str = "calls") -> dict[str, list]:
    """Return, per format, each round's (best A, best B)."""
    out: dict[str, list] = {fmt: [] for fmt in formats}
    for r in range(rounds):
        # Which build's process starts first is alternated too (A and B may be the same folder).
        if r % 2 == 0:
            wa = Worker(a, bodies_path)
            wb = Worker(b, bodies_path, b_job)
        else:
            wb = Worker(b, bodies_path, b_job)
            wa = Worker(a, bodies_path)
        for fmt in formats:
            wa.time(fmt), wb.time(fmt)  # warm up
            ta, tb = [], []
            for k in range(pairs):
                if k % 2:
                    ta.append(wa.time(fmt)), tb.append(wb.time(fmt))
                else:
                    tb.append(wb.time(fmt)), ta.append(wa.time(fmt))
            out[fmt].append((min(ta), min(tb)))
        wa.close(), wb.close()
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", metavar="SRC_A", nargs="?")
    p.add_argument("b", metavar="SRC_B", nargs="?")
    p.add_argument("--rounds", type=int, default=10, help="fresh worker pairs (default 10)")
    p.add_argument("--pairs", type=int, default=12, help="alternated pairs of passes per format a round (default 12)")
    p.add_argument("--formats", default=",".join(ALL), help="comma-separated (default: all seven)")
    p.add_argument("--scale", type=float, default=1.0, help="workload size factor (default 1)")
    p.add_argument("--b-job", choices=["calls", "turn"], default="calls",
                   help="what B times: .tool_calls (default) or .to_response()")
    p.add_argument("--worker", metavar="BODIES", help=argparse.SUPPRESS)
    p.add_argument("--job", default="calls", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.job)
    if not (args.a and args.b):
        p.error("give two src folders")
    formats = [f for f in args.formats.split(",") if f]
    unknown = sorted(set(formats) - set(ALL))
    if unknown:
        p.error(f"unknown format(s): {', '.join(unknown)}")
    with tempfile.TemporaryDirectory() as tmp:
        bodies_path = Path(tmp) / "bodies.pickle"
        make_workload(bodies_path, formats, args.scale)
        results = run(args.a, args.b, formats, args.rounds, args.pairs, bodies_path, args.b_job)
    sys.path.insert(0, str(HERE))
    from compare import machine

    print(machine())
    b_does = "reassemble(...).to_response()" if args.b_job == "turn" else "reassemble(...).tool_calls"
    print(f"A = {args.a}: reassemble(...).tool_calls\nB = {args.b}: {b_does}")
    print(f"{args.rounds} rounds x {args.pairs} pairs of passes; B/A: time of B over time of A, "
          f"rate B/A: its inverse (throughput)")
    print(f"{'format':18} {'best A ms':>9} {'best B ms':>9} {'B/A median':>10}  {'range':>11}  {'rate B/A':>8}")
    for fmt in formats:
        ratios = [tb / ta for ta, tb in results[fmt]]
        rates = [ta / tb for ta, tb in results[fmt]]
        best_a = min(ta for ta, _ in results[fmt]) * 1e3
        best_b = min(tb for _, tb in results[fmt]) * 1e3
        print(f"{fmt:18} {best_a:9.2f} {best_b:9.2f} {statistics.median(ratios):10.3f}  "
              f"{min(ratios):.3f}-{max(ratios):.3f}  {statistics.median(rates):8.3f}")


if __name__ == "__main__":
    main()
