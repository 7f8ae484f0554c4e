"""The twins expose the same API, and CALLSTITCH_NO_EXTENSIONS really switches between them."""

import inspect
import os
import subprocess
import sys

import callstitch
from callstitch import _accumulator_c, _accumulator_py

from callstitch._formats import sink

PUBLIC = ["feed", "feed_chunk", "add", "finalize"]
# What the shared adapters, framers and the batch layer call: in-package, not public API, named
# without an underscore on purpose. Taken from the protocols that document them (_formats/sink.py).
IN_PACKAGE = sorted(name for protocol in (sink.Sink, sink.EventSink, sink.Halting)
                    for name in vars(protocol) if not name.startswith("_"))
INTERNAL = IN_PACKAGE


def public_names(cls):
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def test_same_public_names():
    assert public_names(_accumulator_c.Accumulator) == public_names(_accumulator_py.Accumulator) == sorted(
        PUBLIC + IN_PACKAGE)


def test_the_in_package_names_are_the_protocols():
    assert IN_PACKAGE == ["admit_choice", "argument_room", "call_at", "calls_left", "choice_finished", "complete",
                          "custom_fragment", "cut_open", "event", "fragment", "halt_at_end", "halted", "identify",
                          "keep_own", "no_event", "own_budget", "spend", "text_length", "text_piece", "whole"]


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_the_twins_take_what_the_protocols_document():
    for protocol in (sink.Sink, sink.EventSink, sink.Halting):
        for name in vars(protocol):
            if not name.startswith("_"):
                expected = [p.name for p in inspect.signature(getattr(protocol, name)).parameters.values()]
                for twin in (_accumulator_c.Accumulator, _accumulator_py.Accumulator):
                    got = [p.name for p in inspect.signature(getattr(twin, name)).parameters.values()]
                    assert got == expected, (twin.__module__, name)


def test_same_signatures():
    for name in PUBLIC + INTERNAL:
        c = getattr(_accumulator_c.Accumulator, name)
        py = getattr(_accumulator_py.Accumulator, name)
        assert _parameters(c) == _parameters(py), name


def test_the_classes_have_the_same_signature():
    # The compiled class's is its docstring's text signature: it must say what __init__ takes.
    assert _parameters(_accumulator_c.Accumulator) == _parameters(_accumulator_py.Accumulator) == [
        ("format", inspect.Parameter.POSITIONAL_OR_KEYWORD, "auto"),
        ("limits", inspect.Parameter.POSITIONAL_OR_KEYWORD, None)]
    assert _accumulator_c.Accumulator.__doc__.splitlines()[0] == _accumulator_py.Accumulator.__doc__.splitlines()[0]
    for impl in (_accumulator_c, _accumulator_py):  # and what it says is what the constructor does
        assert impl.Accumulator("gemini", None).finalize().format == "gemini"
        assert impl.Accumulator(limits=None, format="cohere").finalize().format == "cohere"


def test_reassemble_bound_to_a_twin_has_the_public_signature():
    from callstitch._api import make_reassemble
    assert _parameters(make_reassemble(_accumulator_py.Accumulator)) == _parameters(callstitch.reassemble)


def test_same_docstring_summaries():
    for name in PUBLIC:
        c = getattr(_accumulator_c.Accumulator, name).__doc__.splitlines()[0]
        py = getattr(_accumulator_py.Accumulator, name).__doc__.splitlines()[0]
        assert c == py, name


def test_compiled_twin_is_compiled():
    assert _accumulator_c.__file__.endswith((".so", ".pyd")), _accumulator_c.__file__


def test_stub_lists_the_compiled_names():
    stub = os.path.join(os.path.dirname(callstitch.__file__), "_accumulator_c.pyi")
    text = open(stub, encoding="utf-8").read()
    for name in PUBLIC + IN_PACKAGE:
        assert f"def {name}(" in text, name


def _implementation_in_subprocess(value):
    env = dict(os.environ)
    env.pop("CALLSTITCH_NO_EXTENSIONS", None)
    if value is not None:
        env["CALLSTITCH_NO_EXTENSIONS"] = value
    code = "import callstitch; print(callstitch.IMPLEMENTATION, callstitch.Accumulator.__module__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_environment_variable_switches_implementation():
    assert _implementation_in_subprocess(None) == ["c", "callstitch._accumulator_c"]
    assert _implementation_in_subprocess("0") == ["c", "callstitch._accumulator_c"]
    assert _implementation_in_subprocess("1") == ["python", "callstitch._accumulator_py"]


def test_public_api():
    for name in ["reassemble", "Accumulator", "Result", "ToolCall", "ArgumentsError", "StreamError",
                 "IMPLEMENTATION", "__version__"]:
        assert hasattr(callstitch, name), name
    assert set(callstitch.__all__) <= set(dir(callstitch))


def test_same_constructor(both):
    for impl in both:
        assert impl.Accumulator().finalize().format == "auto"  # the default: detected from the stream
        assert impl.Accumulator(format="openai-chat").finalize().format == "openai-chat"
        assert impl.Accumulator("openai-chat").finalize().format == "openai-chat"
        try:
            impl.Accumulator(format="nope")
        except ValueError as exc:
            assert "openai-chat" in str(exc)
        else:
            raise AssertionError("an unknown format must raise ValueError")


def test_failed_compile_fails_the_build_and_names_the_switch(tmp_path):
    import shutil
    root = os.path.join(os.path.dirname(__file__), "..")
    if not os.path.exists(os.path.join(root, "setup.py")):
        import pytest
        pytest.skip("needs the source tree")
    shutil.copy(os.path.join(root, "setup.py"), tmp_path)
    shutil.copytree(os.path.join(root, "src"), tmp_path / "src",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    env = dict(os.environ, CC="false", LDSHARED="false")
    env.pop("CALLSTITCH_NO_EXTENSIONS", None)
    out = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", "lib", "--build-temp", "tmp"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    # The compiler ran and failed (Cython and setuptools come with the test extra): not a missing tool.
    assert "building the compiled extension failed" in out.stderr + out.stdout, out.stderr[-2000:]
    assert "CALLSTITCH_NO_EXTENSIONS=1" in out.stderr + out.stdout
