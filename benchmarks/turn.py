"""Time the whole turn on the chat workload: reassemble(...).tool_calls against reassemble(...).to_response().

Issue 20 asks for reassemble then to_response() at 0.8x or more of the calls-only throughput.
Prints both rates (responses per second, best of --repeat runs) and their ratio, per twin.

    python benchmarks/turn.py [--n 200] [--repeat 5] [--impl c|py|both]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload  # noqa: E402

from callstitch._api import make_reassemble  # noqa: E402

TWINS = {"c": "callstitch._accumulator_c", "py": "callstitch._accumulator_py"}


def best_rate(job, bodies, repeat: int) -> float:
    """Return the best responses-per-second of repeat runs of job over bodies."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for body in bodies:
            job(body)
        best = min(best, time.perf_counter() - start)
    return len(bodies) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="responses in the workload")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--impl", choices=["c", "py", "both"], default="c")
    args = parser.parse_args()
    bodies = [body for body, _ in workload.responses(args.n)]
    for name in (["c", "py"] if args.impl == "both" else [args.impl]):
        reassemble = make_reassemble(importlib.import_module(TWINS[name]).Accumulator)
        calls = best_rate(lambda b: reassemble(b, format="openai-chat").tool_calls, bodies, args.repeat)
        turns = best_rate(lambda b: reassemble(b, format="openai-chat").to_response(), bodies, args.repeat)
        print(f"[{name}] calls only: {calls:9.1f} responses/s   reassemble + to_response(): {turns:9.1f} "
              f"responses/s   ratio {turns / calls:.3f}")


if __name__ == "__main__":
    main()
