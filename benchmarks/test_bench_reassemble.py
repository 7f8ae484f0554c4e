"""pytest-benchmark runs: both twins and the baselines on the same workload.

Run with ``pytest benchmarks/ --benchmark-only``; ``pytest tests`` never collects this file.
Each benchmark times reassembling every body of the workload once per round.
"""

import pytest

import contenders
import workload

pytest.importorskip("pytest_benchmark", reason="the benchmarks need pytest-benchmark (pip install pytest-benchmark)")

WORK = workload.responses(200)
BODIES = [body for body, _ in WORK]
SIZE = sum(map(len, BODIES))
# The SDK peers run at ~2 MB/s: they get a workload of their own, in a group of their own.
PEER_WORK = WORK[:10]


def runner(name, work):
    """Return the contender's runner after checking it on work; skip when it cannot run here."""
    why = contenders.unavailable(name)
    if why:
        pytest.skip(why)
    fn = contenders.get(name)
    if contenders.CONTENDERS[name].kind != "floor":
        wrong = contenders.check(fn, work)
        assert wrong is None, f"{name} reassembled wrong: {wrong}"
    return fn


def run_all(fn, bodies):
    for body in bodies:
        fn(body)


@pytest.mark.benchmark(group="openai-chat: 200 responses")
@pytest.mark.parametrize("name", [
    pytest.param("callstitch-c", id="c"),
    pytest.param("callstitch-py", id="py"),
    pytest.param("seed_orjson", id="seed_orjson"),
    pytest.param("seed_json", id="seed_json"),
    pytest.param("floor_orjson_each_chunk", id="floor_orjson_each_chunk"),
])
def test_reassemble(benchmark, name):
    fn = runner(name, WORK)
    benchmark.extra_info["MB"] = round(SIZE / 1e6, 1)
    benchmark(run_all, fn, BODIES)


@pytest.mark.benchmark(group="openai-chat: 10 responses, SDK peers")
@pytest.mark.parametrize("name", ["callstitch-c", "seed_orjson", "openai_sdk", "langchain", "litellm"])
def test_peers(benchmark, name):
    fn = runner(name, PEER_WORK)
    benchmark.pedantic(run_all, args=(fn, [b for b, _ in PEER_WORK]), rounds=3, iterations=1)


# ---------------------------------------------------------------- the other wire formats

# A smaller cut of compare.py's workloads (a fifth), generated once per format when first used.
FORMAT_RESPONSES = {"openai-responses": 60, "anthropic": 100, "gemini": 300, "bedrock": 80, "cohere": 100,
                    "ollama": 600}
_format_work: dict = {}


def format_work(fmt):
    if fmt not in _format_work:
        _format_work[fmt] = workload.format_responses(fmt, FORMAT_RESPONSES[fmt])
    return _format_work[fmt]


@pytest.mark.parametrize("name", [
    pytest.param("callstitch-c", id="c"),
    pytest.param("callstitch-py", id="py"),
    pytest.param("loop_orjson", id="loop_orjson"),
])
@pytest.mark.parametrize("fmt", workload.FORMATS)
def test_formats(benchmark, fmt, name):
    work = format_work(fmt)
    why = contenders.unavailable_format(fmt, name)
    if why:
        pytest.skip(why)
    fn = contenders.get_format(fmt, name)
    wrong = contenders.check(fn, work)
    assert wrong is None, f"{name} reassembled {fmt} wrong: {wrong}"
    bodies = [body for body, _ in work]
    benchmark.group = f"{fmt}: {len(bodies)} responses"
    benchmark.extra_info["MB"] = round(sum(map(len, bodies)) / 1e6, 1)
    benchmark(run_all, fn, bodies)
