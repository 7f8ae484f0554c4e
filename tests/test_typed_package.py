"""The package's own code type-checks: each format adapter against the Sink protocol, both twins as Sinks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[1]

# Both twins, as the adapters, the framers and the batch layer take them: the compiled one through its
# stub (_accumulator_c.pyi), the pure one through its source. A method missing or typed otherwise fails.
TWINS_AS_SINKS = '''from callstitch._accumulator_c import Accumulator as Compiled
from callstitch._accumulator_py import Accumulator as Pure
from callstitch._formats.sink import EventSink, Halting, Sink

for twin in (Compiled, Pure):
    sink: Sink = twin("openai-chat")
    events: EventSink = twin("ollama")
    halting: Halting = twin("openai-chat")
'''

# The control: an accumulator that lacks one method of EventSink is no EventSink to mypy.
NOT_A_SINK = '''from callstitch._accumulator_py import Accumulator
from callstitch._formats.sink import EventSink


class NoCut(Accumulator):
    cut_open = None  # type: ignore[assignment]


events: EventSink = NoCut("ollama")
'''


def _mypy(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull, *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_package_type_checks():
    # pyproject.toml's [tool.mypy] names the files (src/callstitch) and the one untyped dependency.
    out = _mypy(["--config-file", str(ROOT / "pyproject.toml")], ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues found" in out.stdout


def test_both_twins_are_the_sinks_the_adapters_take(tmp_path):
    (tmp_path / "twins.py").write_text(TWINS_AS_SINKS)
    out = _mypy(["--strict", "twins.py"], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_accumulator_without_a_sink_method_is_caught(tmp_path):
    (tmp_path / "nocut.py").write_text(NOT_A_SINK)
    out = _mypy(["nocut.py"], tmp_path)
    assert out.returncode == 1
    assert '(expression has type "NoCut", variable has type "EventSink")' in out.stdout, out.stdout
    assert 'cut_open: expected "Callable[[int], None]"' in out.stdout, out.stdout
