"""Measure the pure-Python twin against the hand-written orjson loop: the three issue-19 figures.

usage: python benchmarks/pure.py [--responses N] [--rounds R]
       python benchmarks/pure.py --ab SRC_A SRC_B [--rounds R]
       python benchmarks/pure.py --floor

Prints the machine and versions, then three ratios of the pure twin ("callstitch-py"):
  chat    its MB/s over the loop's on the chat workload (target >= 0.8)
  linear  its bytes/s on a 2 MB call over a 20 KB call, each one whole reassemble body (target ~1.0)
  tiny    its time per tiny stream (Accumulator() + one feed + finalize) over the loop's (target <= 2)
and one more, with no target: reads, its MB/s on the chat workload fed one event per feed (as a
gateway's reads mostly come) over the loop's on the same bodies whole (a loop fed by reads would
only add its buffering to its time).
--ab alternates two builds (src dirs) in subprocesses, round by round, and prints both.
--floor prints what a tiny stream costs the pure twin before any per-event logic: its
Accumulator, the objects its Result is made of, and the three parses the loop makes too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
MB = 1e6

TINY = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
        b'"function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')


def best(fn, items: list, repeats: int) -> float:
    """Return the best wall time of fn over every item, out of repeats runs."""
    out = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        out = min(out, time.perf_counter() - t0)
    return out


def figures(responses: int, repeats: int) -> dict:
    """Measure the three ratios in this process (the twin imported from sys.path)."""
    os.environ["CALLSTITCH_NO_EXTENSIONS"] = "1"
    import orjson

    import contenders
    import workload
    twin = contenders._twin("py")
    loop = contenders._seed_loop(orjson.loads)
    work = workload.responses(responses)
    bodies = [b for b, _ in work]
    if contenders.check(twin, work):
        raise SystemExit("the pure twin is WRONG on the chat workload")
    accumulator = contenders.twin("py").Accumulator

    def by_reads(reads: list) -> list:
        acc = accumulator(format="openai-chat")
        for read in reads:
            acc.feed(read)
        return [(c.id, c.name, c.arguments) for c in acc.finalize().tool_calls]

    reads = [[event + b"\n\n" for event in body.split(b"\n\n") if event] for body in bodies]
    if any(by_reads(r) != loop(body) for r, body in zip(reads, bodies)):
        raise SystemExit("the pure twin is WRONG on the chat workload fed event by event")
    small = [workload.long_call(20_000, seed)[0] for seed in range(30)]
    big = [workload.long_call(2_000_000)[0]]
    tiny = [TINY] * 5_000
    expected = loop(TINY)
    if twin(TINY) != expected or twin(big[0]) != loop(big[0]):
        raise SystemExit("the pure twin is WRONG on the tiny or the big body")
    t = {k: float("inf") for k in ("twin", "loop", "reads", "small", "big", "tiny_twin", "tiny_loop")}
    for _ in range(repeats):  # each round goes through all, so a burst of load favours none
        t["twin"] = min(t["twin"], best(twin, bodies, 1))
        t["loop"] = min(t["loop"], best(loop, bodies, 1))
        t["reads"] = min(t["reads"], best(by_reads, reads, 1))
        t["small"] = min(t["small"], best(twin, small, 1))
        t["big"] = min(t["big"], best(twin, big, 1))
        t["tiny_twin"] = min(t["tiny_twin"], best(twin, tiny, 1))
        t["tiny_loop"] = min(t["tiny_loop"], best(loop, tiny, 1))
    size = sum(map(len, bodies))
    return {"chat": t["loop"] / t["twin"], "chat_MBps": size / t["twin"] / MB,
            "linear": (len(big[0]) / t["big"]) / (sum(map(len, small)) / t["small"]),
            "tiny": t["tiny_twin"] / t["tiny_loop"], "tiny_us": t["tiny_twin"] / len(tiny) * 1e6,
            "reads": t["loop"] / t["reads"]}


def floor() -> None:
    """Print the tiny stream's cost to the pure twin and the parts of it no per-event logic can remove."""
    os.environ["CALLSTITCH_NO_EXTENSIONS"] = "1"
    import orjson

    import contenders
    from callstitch._accumulator_py import Accumulator
    from callstitch._finalize import make_call, one_choice_result
    from callstitch._state import StreamState
    from callstitch._turns.openai_chat import ChatTurn
    loop, twin = contenders._seed_loop(orjson.loads), contenders._twin("py")
    arguments = bytearray(b'{"city": "Paris"}')
    payloads = [event[6:] for event in TINY.split(b"\n\n")[:2]]

    def result_objects() -> None:
        state = StreamState("openai-chat")
        state.turn = ChatTurn()
        one_choice_result([make_call(0, 0, "call_1", "get_weather", arguments, None, 0, 0)], None, state)

    def parses() -> None:
        for payload in payloads:
            orjson.loads(payload)
        orjson.loads(arguments)

    parts = {"the loop": lambda: loop(TINY), "the pure twin": lambda: twin(TINY),
             "its Accumulator()": lambda: Accumulator("openai-chat"),
             "its Result's objects (state, turn, call, result)": result_objects,
             "the three parses": parses}
    calls = range(20_000)
    times = {name: best(lambda _call, fn=fn: fn(), calls, 7) / len(calls) * 1e6 for name, fn in parts.items()}
    for name, us in times.items():
        print(f"{name:50} {us:6.2f} us  {us / times['the loop']:.2f}x the loop")
    fixed = sum(us for name, us in times.items() if name not in ("the loop", "the pure twin"))
    print(f"{'floor (the last three)':50} {fixed:6.2f} us  {fixed / times['the loop']:.2f}x the loop")


def ab(a: str, b: str, rounds: int, responses: int) -> None:
    """Alternate builds a and b (src dirs), one subprocess per round each; print the per-figure medians."""
    runs: dict[str, list] = {a: [], b: []}
    for k in range(rounds):
        for src in (a, b) if k % 2 == 0 else (b, a):
            env = dict(os.environ, PYTHONPATH=src, CALLSTITCH_NO_EXTENSIONS="1")
            out = subprocess.run([sys.executable, __file__, "--one", "--responses", str(responses)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            runs[src].append(json.loads(out))
    print(f"{'figure':10} {'A (rounds)':36} {'B (rounds)':36} A med  B med")
    for name in runs[a][0]:
        xa, xb = [r[name] for r in runs[a]], [r[name] for r in runs[b]]
        print(f"{name:10} {', '.join(f'{x:.2f}' for x in xa):36} {', '.join(f'{x:.2f}' for x in xb):36} "
              f"{statistics.median(xa):.2f}  {statistics.median(xb):.2f}")


def main() -> None:
    """Parse the command line and print the figures (or the A/B of two builds)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--responses", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ab", nargs=2, metavar="SRC")
    p.add_argument("--floor", action="store_true", help="the tiny stream's floor, part by part")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(figures(args.responses, 3)))
        return
    import compare
    print(compare.machine())
    print(compare.versions())
    if args.floor:
        floor()
        return
    if args.ab:
        ab(*args.ab, args.rounds, args.responses)
        return
    f = figures(args.responses, args.rounds)
    print(f"chat    {f['chat']:.2f}x the orjson loop ({f['chat_MBps']:.1f} MB/s; target >= 0.8)")
    print(f"linear  {f['linear']:.2f} (2 MB call vs 20 KB call, bytes/s; target ~1.0)")
    print(f"tiny    {f['tiny']:.2f}x the loop's time per tiny stream ({f['tiny_us']:.1f} us; target <= 2)")
    print(f"reads   {f['reads']:.2f}x the orjson loop, fed one event per feed (the loop fed whole bodies)")


if __name__ == "__main__":
    main()
