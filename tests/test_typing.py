"""The public API is typed: a user's script using it the README's way type-checks under mypy --strict."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

# Uses every public name the README shows, as the README shows it; reveal_type says what mypy sees.
USER_SCRIPT = r'''import asyncio
from typing import AsyncIterator

import callstitch

result = callstitch.reassemble(b"", format="openai-chat")
reveal_type(result)
for call in result.tool_calls:
    reveal_type(call)
    print(call.id, call.name, call.arguments, call.raw_arguments, call.error, call.index, call.choice)
print(result.text, result.reasoning, result.refusal, result.finish_reason, result.usage, result.format,
      result.complete, result.errors, [c.tool_calls for c in result.choices])

acc = callstitch.Accumulator(format="auto", limits=callstitch.Limits())
reveal_type(acc.feed(b"data: {}\n\n"))
acc.feed_chunk({"choices": []})
acc.add(0, id="call_1", name="f", arguments="{}")
reveal_type(acc.finalize(strict=False))
reveal_type(callstitch.IMPLEMENTATION)

for chunk in callstitch.tee([b""], format="openai-chat", on_call=lambda c: print(c.name)):
    reveal_type(chunk)


async def relay() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b""
    async for piece in callstitch.atee(chunks(), on_call=print):
        print(len(piece))

asyncio.run(relay())

toolset = callstitch.Toolset([])
for verdict in toolset.check_all(result):
    reveal_type(verdict)
    print(verdict.ok, verdict.call.name, verdict.arguments, verdict.retry_message)

batch = callstitch.reassemble_many([], jobs=1)
for record in batch:
    print(record)
print(batch.summary.calls, batch.summary.errors)
'''

# Each public name must carry its type: were one Any (a lazily imported name, say), these would pass.
MISUSES = {
    "x: int = callstitch.reassemble(b'')": "Incompatible types in assignment",
    "callstitch.Accumulator(format=3)": "incompatible type",
    "callstitch.Toolset([]).check_all(3)": "incompatible type",
    "callstitch.tee([b''], on_call=3)": "incompatible type",
    "callstitch.atee([b''])": "incompatible type",
    "callstitch.reassemble_many([], jobs='2')": "incompatible type",
    "callstitch.reassemble(b'').tool_calls[0].nope": "has no attribute",
    # reassemble has its real signature, not (*Any, **Any)
    "callstitch.reassemble(b'', strict='yes')": "incompatible type",
    "callstitch.reassemble(b'', nope=1)": "Unexpected keyword argument",
    "callstitch.reassemble(b'', 'auto', True)": "Too many positional arguments",
}


def _mypy(tmp_path, source: str) -> subprocess.CompletedProcess:
    path = tmp_path / "user_script.py"
    path.write_text(source)
    # The package as installed, as a user's mypy finds it: its py.typed marks it typed, and its own
    # code is not the user's to check.
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
                           str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_the_readme_usage_type_checks(tmp_path):
    out = _mypy(tmp_path, USER_SCRIPT)
    assert out.returncode == 0, out.stdout + out.stderr
    revealed = [line.split("Revealed type is ", 1)[1].strip('"') for line in out.stdout.splitlines()
                if "Revealed type is" in line]
    assert revealed == ["callstitch._results.Result", "callstitch._results.ToolCall",
                        "list[callstitch._results.ToolCall]", "callstitch._results.Result", "str", "bytes",
                        "callstitch._validate.toolset.Verdict"]


def test_misuse_is_caught(tmp_path):
    source = "import callstitch\n" + "".join(f"{line}\n" for line in MISUSES)
    out = _mypy(tmp_path, source)
    assert out.returncode == 1
    for number, (line, message) in enumerate(MISUSES.items(), start=2):
        assert any(f"user_script.py:{number}:" in got and message in got for got in out.stdout.splitlines()), \
            f"{line!r} passed mypy: {out.stdout}"
