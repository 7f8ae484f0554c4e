"""The implementation fixture: every behaviour test runs against both twins, ids [c] and [py]."""

import importlib
from types import SimpleNamespace

import pytest
from _exit_watch import pytest_sessionfinish, pytest_unconfigure  # noqa: F401 - hooks of this conftest
from _streams import random_cuts

from callstitch._api import make_reassemble

IMPLEMENTATIONS = {"c": "callstitch._accumulator_c", "py": "callstitch._accumulator_py"}


def load_implementation(key):
    """Return a namespace with the twin's Accumulator and a reassemble() bound to it."""
    # A missing build must fail the [c] tests, never skip them.
    module = importlib.import_module(IMPLEMENTATIONS[key])
    return SimpleNamespace(name=key, module=module, Accumulator=module.Accumulator,
                           reassemble=make_reassemble(module.Accumulator))


@pytest.fixture(scope="session", params=list(IMPLEMENTATIONS), ids=list(IMPLEMENTATIONS))
def impl(request):
    """One of the two twins."""
    return load_implementation(request.param)


@pytest.fixture(params=list(IMPLEMENTATIONS), ids=list(IMPLEMENTATIONS))
def every_twin(request, monkeypatch):
    """One twin for the whole process tree: the batch layer here and every subprocess (the CLI, its workers).

    Subprocesses pick theirs the way any import does, by CALLSTITCH_NO_EXTENSIONS ("0": the
    compiled one); the batch layer run in this process (and its forked workers) by settings.
    """
    from callstitch._batch import settings as batch_settings
    twin = load_implementation(request.param)
    monkeypatch.setenv("CALLSTITCH_NO_EXTENSIONS", "1" if request.param == "py" else "0")
    monkeypatch.setattr(batch_settings, "Accumulator", twin.Accumulator)
    return twin


@pytest.fixture(scope="session")
def both():
    """Both twins at once, for tests that compare them."""
    return [load_implementation(k) for k in IMPLEMENTATIONS]


# ---------------------------------------------------------------- the twin-parity helper


def run(impl, body, fmt, cuts=(), limits=None):
    """Reassemble body fed in pieces cut at cuts; return the result and every call handed over early."""
    acc = impl.Accumulator(format=fmt, limits=limits)
    early = []
    last = 0
    for cut in list(cuts) + [len(body)]:
        early += acc.feed(body[last:cut])
        last = cut
    return acc.finalize(), early


def agree(both, body, fmt="ollama", limits=None, seeds=range(4)):
    """Both twins, whole, byte by byte and cut at random: the same result, errors and hand-overs."""
    ways = [(), range(1, len(body))] + [random_cuts(len(body), seed) for seed in seeds]
    first = None
    for cuts in ways:
        for impl in both:
            result, early = run(impl, body, fmt, cuts, limits)
            seen = (result, [str(e) for e in result.errors], [(c.id, c.name, c.raw_arguments) for c in early])
            if first is None:
                first = seen
            assert seen == first, (impl.name, cuts)
    return first[0]


def halted_run(impl, reads, fmt="openai-chat"):
    """Feed reads to an accumulator that halts at the terminator (a batch job's); return the bytes it took and its result.

    The bytes taken are -1 when it never halted.
    """
    acc = impl.Accumulator(format=fmt)
    acc.halt_at_end()
    used = 0
    for read in reads:
        acc.feed(read)
        if acc.halted() >= 0:
            return used + acc.halted(), acc.finalize()
        used += len(read)
    return -1, acc.finalize()


def agree_whole(both, body, fmt):
    """Reassemble body whole with both twins: the same result, errors and turn.

    Return the compiled twin's path counts (_path_counts(), for tests that must see a fast path
    taken) and its result.
    """
    compiled = both[0].module
    seen = []
    compiled._reset_path_counts()
    for impl in both:
        result = impl.reassemble(body, format=fmt)
        if impl.module is compiled:
            counts = compiled._path_counts()
        seen.append((result, [str(e) for e in result.errors], result.to_response(), result.to_message()))
    assert seen[0] == seen[1]
    return counts, seen[0][0]
