"""The implementation fixture: every behaviour test runs against both twins, ids [c] and [py]."""

import importlib
from types import SimpleNamespace

import pytest

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


@pytest.fixture(scope="session")
def both():
    """Both twins at once, for tests that compare them."""
    return [load_implementation(k) for k in IMPLEMENTATIONS]
