"""Every wire format callstitch knows, each declared once: the tables the rest of the package reads.

A format is an adapter module (``handle``, ``claims``, optionally ``close`` and ``State``), the
framing its streams come in, the terminator that ends one response in a capture of many (for
batch splitting), where it stands in auto-detection, and the compiled twin's fast-path code, if
it has one. ``register`` adds a format and updates, in place, every table derived from the
entries: ``ADAPTERS``, ``DETECTION``, ``DEFAULT_FRAMING``, ``TERMINATORS``, ``FAST_CODES``,
``CLOSERS``, ``WHOLE`` and ``STATES`` (an adapter's ``State`` class: what its format remembers between
events, one object per stream). Modules that hold one of these tables see a format registered
later (the tables are never rebound).

Adding an SSE format: write its adapter module, add one ``register(Format(...))`` line below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Optional

from .._wire.framing import NDJSON, SSE


AUTO = "auto"


@dataclass(frozen=True)
class Format:
    """One wire format: its name, its adapter, and what the layers around the adapter need to know of it."""

    name: str
    adapter: ModuleType
    # The framing its streams come in when their first bytes do not tell: "{" starts JSON lines, "["
    # one JSON array, a zero byte the AWS event stream, whatever the format (a log or a proxy may
    # hold any format's events so, and a named format reads them as "auto" does); None: SSE.
    framing: Optional[str]
    # What ends one response in a capture of back-to-back responses (_batch.split); None: not splittable.
    # For an SSE format without rules of its own in _batch.split, a hit counts where it is the value
    # of a "type" field or an SSE event name (as anthropic's message_stop is), and its event is the
    # response's last (a next response glued onto it is cut off).
    terminator: Optional[re.Pattern]
    # Auto-detection asks the formats in ascending rank: the most specific first.
    rank: int
    # The compiled twin's FMT_* code for a format it reads in place (its enum in _c/paths.pxi);
    # 0: the general path only.
    fast_code: int = 0


ENTRIES: dict[str, Format] = {}
ADAPTERS: dict[str, ModuleType] = {}
DETECTION: list[tuple[str, Callable]] = []   # (name, claims), in detection order
DEFAULT_FRAMING: dict[str, str] = {AUTO: SSE}  # the framing when the first bytes do not tell
TERMINATORS: dict[str, re.Pattern] = {}
FAST_CODES: dict[str, int] = {}
STATES: dict[str, type] = {}       # the adapters' State classes, for those that remember something
# The adapters' is_whole(obj), for formats whose response may come not streamed, as one JSON object
# of a shape no event has (a batch file of them one a line is cut after each: _batch.split).
WHOLE: dict[str, Callable] = {}
CLOSERS: dict[str, Callable] = {}  # the adapters' close(acc, state), for those that have one
# What a stream of each format starts with, in one lookup (StreamState, once per stream): the
# framing when its first bytes do not tell, and its State class (None: it keeps none).
STARTS: dict[str, tuple[str, Optional[type]]] = {AUTO: (SSE, None)}


def register(fmt: Format) -> Format:
    """Add a format; raise ValueError if its name is taken (or is "auto")."""
    if fmt.name in ENTRIES or fmt.name == AUTO:
        raise ValueError(f"format {fmt.name!r} is already registered")
    ENTRIES[fmt.name] = fmt
    ADAPTERS[fmt.name] = fmt.adapter
    DEFAULT_FRAMING[fmt.name] = fmt.framing or SSE
    if fmt.terminator is not None:
        TERMINATORS[fmt.name] = fmt.terminator
    if fmt.fast_code:
        FAST_CODES[fmt.name] = fmt.fast_code
    if hasattr(fmt.adapter, "State"):
        STATES[fmt.name] = fmt.adapter.State
    if hasattr(fmt.adapter, "close"):
        CLOSERS[fmt.name] = fmt.adapter.close
    if hasattr(fmt.adapter, "is_whole"):
        WHOLE[fmt.name] = fmt.adapter.is_whole
    STARTS[fmt.name] = (DEFAULT_FRAMING[fmt.name], STATES.get(fmt.name))
    ranked = sorted(ENTRIES.values(), key=lambda entry: entry.rank)
    DETECTION[:] = [(entry.name, entry.adapter.claims) for entry in ranked]
    return fmt


def unregister(name: str) -> None:
    """Remove a format registered before (for tests that add a toy one)."""
    del ENTRIES[name]
    for table in (ADAPTERS, DEFAULT_FRAMING, TERMINATORS, FAST_CODES, STATES, CLOSERS, WHOLE, STARTS):
        table.pop(name, None)
    DETECTION[:] = [pair for pair in DETECTION if pair[0] != name]


def new_state(name: str) -> Any:
    """Return a fresh per-stream state of the format's adapter, or None if it keeps none."""
    cls = STATES.get(name)
    return None if cls is None else cls()


def names() -> tuple[str, ...]:
    """Return the format names a caller may pass, in the order they were registered, then "auto"."""
    return tuple(ENTRIES) + (AUTO,)


# The adapters are imported only now, the tables above defined: through _text and _finalize they
# import _state, which takes STARTS from this module, partial as it then is.
from . import anthropic, bedrock, cohere, gemini, ollama, openai_chat, openai_responses  # noqa: E402

# The seven formats. Codes: the compiled twin's FMT_CHAT … FMT_OLLAMA. Ranks: responses, anthropic
# and cohere name their events; bedrock's and gemini's keys are their own; ollama's "done" line
# and chat's bare "choices" are the most generic, so they are asked last. Chat's terminator is
# [DONE]; an in-band error event, after which a server sends nothing more, ends it too (_batch.split).
register(Format("openai-chat", openai_chat, SSE, re.compile(rb"\[DONE\]"), rank=70, fast_code=1))
register(Format("openai-responses", openai_responses, SSE,
                re.compile(rb'response\.(?:completed|failed|incomplete)(?=["\r\n])'), rank=10, fast_code=2))
register(Format("anthropic", anthropic, SSE, re.compile(rb'message_stop(?=["\r\n])'), rank=20, fast_code=3))
register(Format("gemini", gemini, None, re.compile(rb'"finishReason"\s*:\s*"'), rank=50, fast_code=6))
register(Format("bedrock", bedrock, None, re.compile(rb'messageStop(?=["\r\n])'), rank=40, fast_code=4))
register(Format("cohere", cohere, SSE, re.compile(rb'message-end(?=["\r\n])'), rank=30, fast_code=5))
register(Format("ollama", ollama, NDJSON, re.compile(rb'"done"\s*:\s*true'), rank=60, fast_code=7))
