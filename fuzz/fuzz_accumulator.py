"""Coverage-guided fuzzing of both accumulator twins with atheris.

Each input is split into a format choice, read sizes, random limits, whether reads also end where
each event ends, whether to halt at the terminator as a batch job does, and a body; both twins
reassemble it and must agree (on where they halt too), and neither may crash or raise; and under
the random limits every call must be the unlimited one whole or marked cut (never altered), every
text a prefix of the unlimited one (tests/_cutcheck.py). Run it (see fuzz/README.md):

    python fuzz/fuzz_accumulator.py fuzz/corpus -max_total_time=600
"""

import re
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _cutcheck import cut_or_whole  # noqa: E402  (the rule, written once for the tests and here)

with atheris.instrument_imports(include=["callstitch"]):
    import callstitch  # noqa: F401  (instrumented: the Python side counts for coverage too)
    from callstitch import _accumulator_c, _accumulator_py
    from callstitch._formats.registry import DEFAULT_FRAMING

FORMATS = ("openai-chat", "auto", "openai-responses", "anthropic", "gemini", "bedrock", "cohere", "ollama")
# Small limits so the limit paths are reached by small inputs too.
LIMITS = callstitch.Limits(call_bytes=4096, stream_bytes=16384, calls=16, choices=4, event_bytes=2048)


def summary(result):
    """What both twins must agree on."""
    calls = [(c.id, c.name, c.choice, c.index, c.arguments, c.raw_arguments,
              None if c.error is None else (c.error.kind, c.error.offset), c.quirks) for c in result.tool_calls]
    errors = [(e.kind, e.offset) for e in result.errors]
    return (calls, errors, result.complete, result.format, result.text, result.reasoning, result.finish_reason,
            turn(result))


def turn(result):
    """The whole turn (to_response() and each choice's to_message()), or what asking for it raised."""
    try:
        return result.to_response(), [result.to_message(choice.index) for choice in result.choices[:1]]
    except Exception as exc:  # noqa: BLE001 - the twins must agree on the failure too
        return repr(exc)


def result_of(implementation, fmt, body, cuts, limits):
    acc = implementation.Accumulator(format=fmt, limits=limits)
    pos = 0
    for cut in cuts:
        acc.feed(body[pos:cut])
        pos = cut
    acc.feed(body[pos:])
    return acc.finalize()


def run(implementation, fmt, body, cuts, limits):
    return summary(result_of(implementation, fmt, body, cuts, limits))


def halted_of(implementation, fmt, body, cuts, limits):
    """Reassemble as a batch job does, halting at the terminator: the bytes the stream took and its summary."""
    acc = implementation.Accumulator(format=fmt, limits=limits)
    acc.halt_at_end()
    pos, used = 0, -1
    for cut in [*cuts, len(body)]:
        acc.feed(body[pos:cut])
        if acc.halted() >= 0:
            used = pos + acc.halted()
            break
        pos = cut
    return used, summary(acc.finalize())


def random_limits(fdp):
    """Return Limits with each of call_bytes, stream_bytes, calls, choices, event_bytes absent or small.

    A dropped event (Limits.event_bytes) cuts every call still open and every text: cut_or_whole
    then matches the calls in order (one dropped whole shifts the others' positions).
    """
    def pick(most):
        return None if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, most)
    return callstitch.Limits(call_bytes=pick(512), stream_bytes=pick(2048), calls=pick(6), choices=pick(3),
                             event_bytes=pick(1024))


def check_cut_or_whole(fmt, body, cuts, limits):
    """Fail when a limit altered a call or holed a text, for either twin."""
    for implementation in (_accumulator_c, _accumulator_py):
        unlimited = result_of(implementation, fmt, body, [], None)
        limited = result_of(implementation, fmt, body, cuts, limits)
        if limited.format != unlimited.format:
            # format="auto" on a body of two formats: the drops left the other format's events to
            # be seen first, so the limited stream was read as that one; compare it read so whole.
            # Named, a format frames the body its own way: when that is not the way the first
            # reading framed it (Ollama's JSON lines read out of SSE data lines, say), the named
            # reading is no baseline, and only the checks above (twins agree) hold.
            if DEFAULT_FRAMING[limited.format] != DEFAULT_FRAMING[unlimited.format]:
                continue
            unlimited = result_of(implementation, limited.format, body, [], None)
        problems = cut_or_whole(limited, unlimited, limits.event_bytes is not None)
        if problems:
            raise AssertionError(f"{implementation.__name__} on {fmt} under {limits}: {problems}")


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    fmt = FORMATS[fdp.ConsumeIntInRange(0, len(FORMATS) - 1)]
    limits = LIMITS if fdp.ConsumeBool() else None
    cut_limits = random_limits(fdp)
    raw_cuts = [fdp.ConsumeIntInRange(0, 1 << 16) for _ in range(fdp.ConsumeIntInRange(0, 8))]
    event_reads = fdp.ConsumeBool()
    halting = fdp.ConsumeBool()
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    cuts = sorted(cut % (len(body) + 1) for cut in raw_cuts)
    if event_reads:  # reads that also end where each event ends, as most network reads do
        cuts = sorted(set(cuts).union(m.end() for m in re.finditer(rb"\n\n|\r\n\r\n", body)))
    c = run(_accumulator_c, fmt, body, cuts, limits)
    py = run(_accumulator_py, fmt, body, cuts, limits)
    if c != py:
        raise AssertionError(f"twins disagree on {fmt}:\nc:  {c!r}\npy: {py!r}")
    whole = run(_accumulator_c, fmt, body, [], limits)
    if whole != c:
        raise AssertionError(f"split reads changed the result on {fmt}:\nwhole: {whole!r}\nsplit: {c!r}")
    limited = [run(i, fmt, body, cuts, cut_limits) for i in (_accumulator_c, _accumulator_py)]
    if limited[0] != limited[1]:
        raise AssertionError(f"twins disagree on {fmt} under {cut_limits}:\nc:  {limited[0]!r}\npy: {limited[1]!r}")
    check_cut_or_whole(fmt, body, cuts, cut_limits)
    if halting:
        halted = [halted_of(i, fmt, body, cuts, limits) for i in (_accumulator_c, _accumulator_py)]
        if halted[0] != halted[1]:
            raise AssertionError(f"twins disagree on {fmt} halting:\nc:  {halted[0]!r}\npy: {halted[1]!r}")
        whole = halted_of(_accumulator_c, fmt, body, [], limits)
        if whole != halted[0]:
            raise AssertionError(f"split reads changed the halt on {fmt}:\nwhole: {whole!r}\nsplit: {halted[0]!r}")


def main():
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
