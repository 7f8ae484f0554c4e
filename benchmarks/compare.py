"""Compare callstitch with the ways people reassemble streamed tool calls today.

usage: python benchmarks/compare.py [--responses N] [--quick] [--png PATH] [--formats-png PATH]
       python benchmarks/compare.py --formats [FMT,FMT...] [--quick] [--formats-png PATH]
       python benchmarks/compare.py --memory [--impl c|py] [--gigabytes G]

Prints the machine and versions, the openai-chat table (MB/s, events/s, ratios), the
linear-cost line, then the table of the other wire formats (each twin against the hand-written
orjson loop for that format, with the target ratio), and draws them to benchmarks/results.png
and benchmarks/results_formats.png. --formats runs only the wire-format table. --memory instead
feeds ~1 GB of streams in 64 KiB reads and reports peak RSS against the largest call.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import contenders
import workload

HERE = Path(__file__).resolve().parent
READ = 65536
MB = 1e6


def machine() -> str:
    """Return the CPU model, cores, OS and Python in one line."""
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or cpu
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{cpu}, {cores} cores, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()} ({platform.python_implementation()})")


def versions() -> str:
    """Return the versions of callstitch and of every library a contender uses."""
    out = []
    try:
        import callstitch
        out.append(f"callstitch {callstitch.__version__} (default implementation: {callstitch.IMPLEMENTATION})")
    except ImportError as exc:
        out.append(f"callstitch: not importable ({exc})")
    for dist in ("orjson", "openai", "langchain-core", "litellm"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist} not installed")
    return ", ".join(out)


def best_time(fn, bodies: list[bytes], repeats: int) -> float:
    """Return the best wall time of running fn over every body, out of repeats runs."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for body in bodies:
            fn(body)
        best = min(best, time.perf_counter() - t0)
    return best


def measure(work: list, slow_n: int, repeats: int) -> list[dict]:
    """Check and time every contender; slow ones on the first slow_n responses only."""
    rows, timed = [], []
    for name, spec in contenders.CONTENDERS.items():
        row = {"name": name, "kind": spec.kind, "rate": None, "events": None, "responses": 0}
        rows.append(row)
        why = contenders.unavailable(name)
        if why:
            row.update(status="missing", note=why)
            continue
        fn = contenders.get(name)
        subset = work[:slow_n] if spec.slow else work
        try:
            wrong = None if spec.kind == "floor" else contenders.check(fn, subset)
        except Exception as exc:  # one broken contender must not hide the others' rows
            row.update(status="ERROR", note=f"{type(exc).__name__}: {exc}")
            continue
        row.update(status="floor" if spec.kind == "floor" else ("WRONG" if wrong else "ok"), note=wrong,
                   bodies=[b for b, _ in subset], best=float("inf"))
        timed.append((row, fn))
    # Rounds go through every contender in turn, so a burst of load elsewhere does not favour one.
    for _ in range(repeats):
        for row, fn in timed:
            row["best"] = min(row["best"], best_time(fn, row["bodies"], 1))
    for row, _ in timed:
        bodies = row.pop("bodies")
        dt = row.pop("best")
        row.update(responses=len(bodies), rate=sum(map(len, bodies)) / dt,
                   events=sum(map(workload.count_events, bodies)) / dt)
    return rows


def print_table(rows: list[dict]) -> None:
    """Print the comparison table with its ratios."""
    rate = {r["name"]: r["rate"] for r in rows}
    c, seed = rate.get("callstitch-c"), rate.get("seed_orjson")
    print(f"{'contender':<24} {'status':<8} {'resp':>5} {'MB/s':>9} {'events/s':>11} "
          f"{'C ×faster':>10} {'× seed_orjson':>14}")
    for r in rows:
        if r["rate"] is None:
            print(f"{r['name']:<24} {r['status']:<8}   —  {r['note']}")
            continue
        vs_c = f"{c / r['rate']:.2f}" if c else "—"
        vs_seed = f"{r['rate'] / seed:.2f}" if seed else "—"
        print(f"{r['name']:<24} {r['status']:<8} {r['responses']:>5} {r['rate'] / MB:>9.1f} {r['events']:>11,.0f} "
              f"{vs_c:>10} {vs_seed:>14}")
    for r in rows:
        if r["status"] == "WRONG":
            print(f"  {r['name']} is WRONG: {r['note']}")


def linear_cost(repeats: int) -> list[str]:
    """Time each twin on a 20 KB call and a 4 MB call fed in 64 KiB reads; bytes/s should not drop with size."""
    # 100 different small bodies (~225 MB), so that neither size is timed from a warm CPU cache.
    smalls = [workload.long_call(20_000, seed) for seed in range(100)]
    big = workload.long_call(4_000_000)
    lines = []
    for impl in ("c", "py"):
        name = f"callstitch-{impl}"
        why = contenders.unavailable(name)
        if why:
            lines.append(f"linear cost, {name}: missing ({why})")
            continue
        accumulator = contenders.twin(impl).Accumulator

        def fn(body: bytes) -> list:
            acc = accumulator(format="openai-chat")
            for i in range(0, len(body), READ):
                acc.feed(body[i:i + READ])
            return [(c.id, c.name, c.arguments) for c in acc.finalize().tool_calls]

        runs = [b for b, _ in smalls], [big[0]]
        best = [float("inf")] * 2
        try:
            for body, expected in (smalls[0], big):
                if fn(body) != expected:
                    raise ValueError(f"WRONG result on a {len(body) / MB:.0f} MB body")
            for _ in range(repeats):  # alternate, so both sizes meet the same machine load
                for k, bodies in enumerate(runs):
                    best[k] = min(best[k], best_time(fn, bodies, 1))
        except Exception as exc:
            lines.append(f"linear cost, {name}: {type(exc).__name__}: {exc}")
            continue
        rates = [sum(map(len, bodies)) / t for bodies, t in zip(runs, best)]
        lines.append(f"linear cost, {name}: 4 MB call {rates[1] / MB:.0f} MB/s vs 20 KB call "
                     f"{rates[0] / MB:.0f} MB/s of body, ratio {rates[1] / rates[0]:.2f} (1.00 = linear)")
    return lines


def chart(rows: list[dict], path: Path, title: str) -> None:
    """Draw MB/s per contender as horizontal bars on a log scale."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colours = {"callstitch": "#d62728", "baseline": "#1f77b4", "floor": "#7f7f7f", "peer": "#ff7f0e"}
    rows = sorted(rows, key=lambda r: r["rate"] or 0)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.6))
    timed = [r["rate"] for r in rows if r["rate"]]
    left = min(timed) / MB / 3 if timed else 0.1
    for y, r in enumerate(rows):
        if r["rate"] is None:
            ax.text(left * 1.3, y, r["status"], va="center", color="#7f7f7f", style="italic")
            continue
        mbs = r["rate"] / MB
        ax.barh(y, mbs - left, left=left, color=colours[r["kind"]],
                hatch="//" if r["status"] == "WRONG" else None)
        ax.text(mbs * 1.05, y, f"{mbs:,.1f}" + (" (WRONG)" if r["status"] == "WRONG" else ""), va="center",
                fontsize=9)
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows])
    ax.legend(handles=[Patch(color=c, label=k) for k, c in colours.items()], loc="lower right", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(left, max(timed or [1e6]) / MB * 4)
    ax.set_xlabel("MB/s of raw SSE body (log scale; higher is better)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- the other wire formats

# Responses per format, for ~9-18 MB of body each: the whole-call formats (Gemini, Ollama) have
# small bodies, so they get more responses.
FORMAT_RESPONSES = {"openai-responses": 300, "anthropic": 500, "gemini": 1500, "bedrock": 400, "cohere": 500,
                    "ollama": 3000}
# The target: callstitch against a straightforward Python + orjson loop over the same events.
FORMAT_TARGETS = {"anthropic": 3.0, "openai-responses": 3.0}
DEFAULT_TARGET = 1.5
FORMAT_NAMES = ("callstitch-c", "callstitch-py", "loop_orjson")


def measure_formats(formats: list[str], scale: float, repeats: int) -> list[dict]:
    """Check and time both twins and the hand-written loop on each format's workload; one row per format."""
    rows = []
    for fmt in formats:
        n = max(20, int(FORMAT_RESPONSES[fmt] * scale))
        work = workload.format_responses(fmt, n)
        bodies = [b for b, _ in work]
        size = sum(map(len, bodies))
        row = {"format": fmt, "responses": n, "bytes": size, "target": FORMAT_TARGETS.get(fmt, DEFAULT_TARGET),
               "events": sum(workload.count_format_events(fmt, b) for b in bodies), "rate": {}, "status": {}}
        timed = []
        for name in FORMAT_NAMES:
            why = contenders.unavailable_format(fmt, name)
            if why:
                row["status"][name] = f"missing: {why}"
                continue
            fn = contenders.get_format(fmt, name)
            try:
                wrong = contenders.check(fn, work)
            except Exception as exc:  # one broken contender must not hide the others
                row["status"][name] = f"ERROR: {type(exc).__name__}: {exc}"
                continue
            row["status"][name] = f"WRONG: {wrong}" if wrong else "ok"
            timed.append((name, fn))
        best = {name: float("inf") for name, _ in timed}
        for _ in range(repeats):  # rounds take turns, so a burst of load elsewhere favours no one
            for name, fn in timed:
                best[name] = min(best[name], best_time(fn, bodies, 1))
        row["rate"] = {name: size / t for name, t in best.items()}
        rows.append(row)
        print(f"  {fmt}: {n} responses, {size / MB:.1f} MB, timed", flush=True)
    return rows


def verdict(row: dict) -> tuple[float | None, float | None, str]:
    """Return (c/loop, py/loop, PASS/MISS/—) of one format row; the target applies to callstitch-C."""
    rate, status = row["rate"], row["status"]
    loop = rate.get("loop_orjson") if status.get("loop_orjson") == "ok" else None
    c = rate.get("callstitch-c") if status.get("callstitch-c") == "ok" else None
    py = rate.get("callstitch-py") if status.get("callstitch-py") == "ok" else None
    c_ratio = c / loop if c and loop else None
    py_ratio = py / loop if py and loop else None
    if c_ratio is None:
        return c_ratio, py_ratio, "—"
    return c_ratio, py_ratio, "PASS" if c_ratio >= row["target"] else "MISS"


def print_formats_table(rows: list[dict]) -> None:
    """Print one line per wire format: MB/s of each contender, the ratios to the loop, the target and verdict."""
    def mbs(row, name):
        r = row["rate"].get(name)
        return f"{r / MB:.1f}" if r else "—"

    print(f"{'format':<17} {'resp':>5} {'MB':>5} {'events':>7} {'C MB/s':>7} {'py MB/s':>8} {'loop MB/s':>10} "
          f"{'C/loop':>7} {'py/loop':>8} {'target':>7}  verdict (C)")
    for row in rows:
        c_ratio, py_ratio, v = verdict(row)
        print(f"{row['format']:<17} {row['responses']:>5} {row['bytes'] / MB:>5.1f} {row['events']:>7,} "
              f"{mbs(row, 'callstitch-c'):>7} {mbs(row, 'callstitch-py'):>8} {mbs(row, 'loop_orjson'):>10} "
              f"{f'{c_ratio:.2f}x' if c_ratio else '—':>7} {f'{py_ratio:.2f}x' if py_ratio else '—':>8} "
              f"{row['target']:>6.1f}x  {v}")
    for row in rows:
        for name, st in row["status"].items():
            if st != "ok":
                print(f"  {row['format']} {name}: {st}")


def chart_formats(rows: list[dict], path: Path, title: str) -> None:
    """Draw MB/s per format, the twins beside the loop, each group marked with C/loop against its target."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colours = {"callstitch-c": "#d62728", "callstitch-py": "#ff9896", "loop_orjson": "#1f77b4"}
    fig, ax = plt.subplots(figsize=(10, 0.95 * len(rows) + 1.8))
    rates = [r for row in rows for r in row["rate"].values() if r]
    left = min(rates) / MB / 3 if rates else 0.1
    height = 0.26
    for y, row in enumerate(rows):
        for k, name in enumerate(FORMAT_NAMES):
            pos = y + (k - 1) * height  # C on top of each group
            rate = row["rate"].get(name)
            if not rate:
                ax.text(left * 1.3, pos, row["status"].get(name, "missing")[:40], va="center", fontsize=7,
                        color="#7f7f7f", style="italic")
                continue
            wrong = row["status"].get(name, "").startswith("WRONG")
            ax.barh(pos, rate / MB - left, left=left, height=height, color=colours[name], hatch="//" if wrong else None)
            ax.text(rate / MB * 1.04, pos, f"{rate / MB:,.1f}" + (" (WRONG)" if wrong else ""), va="center", fontsize=7)
        c_ratio, _, v = verdict(row)
        if c_ratio is not None:
            ax.text(max(rates) / MB * 2.2, y, f"C/loop {c_ratio:.2f}x\ntarget {row['target']:.1f}x: {v}",
                    va="center", fontsize=8, color="#2ca02c" if v == "PASS" else "#d62728")
    ax.set_yticks(range(len(rows)), [row["format"] for row in rows])
    ax.invert_yaxis()
    ax.legend(handles=[Patch(color=c, label=k) for k, c in colours.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize=8, frameon=False)
    ax.set_xscale("log")
    ax.set_xlim(left, max(rates or [1e6]) / MB * 8)
    ax.set_xlabel("MB/s of raw body (log scale; higher is better)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_formats(formats: list[str], quick: bool, png: Path) -> None:
    """Time every wire format, print its table and draw its chart."""
    scale, repeats = (0.2, 1) if quick else (1.0, 5)
    print(f"wire formats: each twin and the hand-written orjson loop on the same bodies (checked first), "
          f"best of {repeats}; target = C/loop\n", flush=True)
    rows = measure_formats(formats, scale, repeats)
    print()
    print_formats_table(rows)
    chart_formats(rows, png, machine() + "\nwire formats: callstitch twins vs a hand-written Python + orjson loop")
    print(f"\nchart: {png}")


# ---------------------------------------------------------------- memory


def rss_now() -> int:
    """Return the resident set size now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_pass(kind: str, impl: str, gigabytes: float) -> dict:
    """Feed a stream in 64 KiB reads and return what it cost; runs in its own process for a clean peak."""
    accumulator = contenders.twin(impl).Accumulator
    fed = largest = 0
    if kind == "gateway":
        # A gateway: one Accumulator per response, responses back to back, a pool of bodies repeated.
        pool = workload.responses(200, seed=11)
        base = rss_now()
        t0 = time.perf_counter()
        for n, (body, expected) in enumerate(itertools.cycle(pool)):
            if fed >= gigabytes * 1e9:
                break
            acc = accumulator(format="openai-chat")
            for i in range(0, len(body), READ):
                acc.feed(body[i:i + READ])
            calls = acc.finalize().tool_calls
            fed += len(body)
            if n < len(pool):  # check each body once; later rounds are the same bodies
                if [(c.id, c.name, c.arguments) for c in calls] != expected:
                    return {"error": f"response {n} reassembled wrong"}
                largest = max([largest] + [len(c.raw_arguments.encode()) for c in calls])
    else:
        # One stream carrying one 20 MB call, generated as it is read.
        pieces, expected = workload.long_call_pieces(20_000_000)
        base = rss_now()
        t0 = time.perf_counter()
        acc = accumulator(format="openai-chat")
        # The generator's own peak came before `base`, so the process maximum (ru_maxrss) would
        # hide ours: sample the current RSS instead, every 256 reads and after finalize. fed_peak is
        # the growth while the call streams in: the read that completes it (its finish reason)
        # also parses it, which the peak after finalize counts.
        fed_peak = base
        handed = False
        for n, data in enumerate(workload.reads(pieces, READ)):
            if not handed and n % 256 == 0:
                fed_peak = max(fed_peak, rss_now())
            handed = bool(acc.feed(data)) or handed
            fed += len(data)
        calls = acc.finalize().tool_calls
        seconds = time.perf_counter() - t0
        # Read before checking: the check's own copies must not count.
        peak = max(fed_peak, rss_now())
        if [(c.id, c.name, c.arguments) for c in calls] != [expected]:
            return {"error": "the 20 MB call reassembled wrong"}
        largest = 20_000_000  # long_call_pieces makes the arguments exactly this many bytes
        return {"fed": fed, "seconds": seconds, "largest": largest, "base": base, "peak": peak,
                "fed_peak": fed_peak}
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {"fed": fed, "seconds": seconds, "largest": largest, "base": base, "peak": peak}


def fmt_bytes(n: float) -> str:
    """Return a byte count in KB or MB."""
    return f"{n / MB:.1f}MB" if n >= MB else f"{n / 1e3:.1f}KB"


def memory(impls: list[str], gigabytes: float) -> None:
    """Run each memory pass in a child process and print peak RSS against the largest call."""
    print(machine())
    print(versions())
    print(f"{'twin':<5} {'pass':<22} {'stream':>8} {'MB/s':>6} {'largest call':>13} {'RSS before':>11} "
          f"{'peak RSS':>9} {'growth':>9} {'growth/call':>12}")
    for impl in impls:
        why = contenders.unavailable(f"callstitch-{impl}")
        if why:
            print(f"{impl:<5} missing: {why}")
            continue
        for kind, label in (("gateway", f"per response, {gigabytes:g} GB"), ("long", "one 20 MB call")):
            out = subprocess.run([sys.executable, __file__, "--memory-pass", kind, "--impl", impl,
                                  "--gigabytes", str(gigabytes)], capture_output=True, text=True)
            if out.returncode:
                print(f"{impl:<5} {label:<22} crashed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.splitlines()[-1])
            if "error" in r:
                print(f"{impl:<5} {label:<22} WRONG: {r['error']}")
                continue
            growth = max(0, r["peak"] - r["base"])
            if "fed_peak" in r:
                fed_growth = max(0, r["fed_peak"] - r["base"])
                label += f" (feeding: +{fed_growth / MB:.0f}MB)"
            print(f"{impl:<5} {label:<22} {r['fed'] / 1e9:>6.2f}GB {r['fed'] / r['seconds'] / MB:>6.0f} "
                  f"{fmt_bytes(r['largest']):>13} {r['base'] / MB:>9.0f}MB {r['peak'] / MB:>7.0f}MB "
                  f"{growth / MB:>7.1f}MB {growth / r['largest'] if growth >= MB else 0:>11.1f}×")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run the comparison or the memory check."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--responses", type=int, default=1000, help="responses in the workload (default 1000, ~75 MB)")
    p.add_argument("--quick", action="store_true", help="a smaller workload, one timing run each")
    p.add_argument("--png", type=Path, default=HERE / "results.png", help="where to draw the chart")
    p.add_argument("--formats", nargs="?", const=",".join(workload.FORMATS), metavar="FMT,FMT",
                   help="only the wire-format table (all formats but openai-chat, or those listed)")
    p.add_argument("--formats-png", type=Path, default=HERE / "results_formats.png",
                   help="where to draw the wire-format chart")
    p.add_argument("--memory", action="store_true", help="measure peak RSS instead of speed")
    p.add_argument("--impl", choices=["c", "py"], action="append", help="twin(s) for --memory (default both)")
    p.add_argument("--gigabytes", type=float, default=1.0, help="size of the --memory gateway stream")
    p.add_argument("--memory-pass", choices=["gateway", "long"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.memory_pass:
        print(json.dumps(memory_pass(args.memory_pass, args.impl[0], args.gigabytes)))
        return
    if args.memory:
        memory(args.impl or ["c", "py"], args.gigabytes)
        return
    if args.formats:
        formats = [f.strip() for f in args.formats.split(",") if f.strip()]
        unknown = [f for f in formats if f not in workload.FORMATS]
        if unknown:
            p.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(workload.FORMATS)}")
        print(machine())
        print(versions(), flush=True)
        run_formats(formats, args.quick, args.formats_png)
        return

    n = min(args.responses, 200) if args.quick else args.responses
    repeats = 1 if args.quick else 3
    work = workload.responses(n)
    size = sum(len(b) for b, _ in work)
    slow_n = max(10, n // 20)
    header = [machine(), versions(),
              f"workload: {n} responses, {size / MB:.1f} MB, {sum(workload.count_events(b) for b, _ in work):,} "
              f"events, {sum(len(c) for _, c in work):,} tool calls (SDK peers: first {slow_n} responses); "
              f"best of {repeats}"]
    print("\n".join(header), flush=True)
    rows = measure(work, slow_n, repeats)
    print()
    print_table(rows)
    print()
    for line in linear_cost(repeats):
        print(line)
    chart(rows, args.png, "\n".join(header[:1] + [f"{n} OpenAI chat streams, {size / MB:.0f} MB"]))
    print(f"\nchart: {args.png}\n")
    run_formats(list(workload.FORMATS), args.quick, args.formats_png)


if __name__ == "__main__":
    main()
