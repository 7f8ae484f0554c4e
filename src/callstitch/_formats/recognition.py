"""Say so when a body held no event of its format: an empty body, keep-alives only, an error page, noise.

Written once for both twins: while framing they note the first line that is no event of the
framing (StreamState.note_stray), _dispatch.foreign notes the events, and at the end of the
stream each twin calls unrecognised(). A body that yields nothing must not read as a clean empty
Result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from . import dispatch as _dispatch
from .._results import excerpt

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState

KEEP_ALIVES_ONLY = "the body holds no event, only blank lines or comments (keep-alives)"
# The first bytes of a compressed body (gzip, zstandard, bzip2, xz), and its compression's name.
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
# Errors of single events that leave unsaid what the body is (a JSON document of no format, read
# as a line of JSON, is an event of the wrong shape to an adapter that names its events).
_SAYS_NOTHING_OF_THE_BODY = ("malformed chunk", "unexpected shape")


def only_keep_alives(result: Any) -> bool:
    """Tell whether a Result is of a body that held nothing but blank lines and SSE comments."""
    return (not result.tool_calls and not result.complete and len(result.errors) == 1
            and result.errors[0].kind == "not a stream" and result.errors[0].detail.endswith(KEEP_ALIVES_ONLY))


def unrecognised(state: StreamState, has_content: bool, fed: bool) -> None:
    """Record one "not a stream" error when no event of the format came and nothing else was reported.

    has_content: the accumulator holds a call or text (fed as fragments, say); fed: any byte was fed.
    """
    if state.recognised or state.complete or has_content:
        return
    if state.errors and ((state.stray is None and state.first_event is None)
                         or any(e.kind not in _SAYS_NOTHING_OF_THE_BODY for e in state.errors)):
        return  # what was reported says it: an in-band error, a misnamed format, a limit, a cut event
    fmt = state.format
    what = "no event of any known format" if fmt == "auto" else f"no event of {fmt}"
    if state.first_event is not None:
        offset, obj = state.first_event
        state.error("not a stream", f"{what} was recognised: its events are of no known format", offset, obj)
    elif state.stray is not None:
        offset, line = state.stray
        state.error("not a stream", f"{what} was recognised: {_looks_like(line)}, near {excerpt(line)!r}",
                    offset, line)
    elif fed:
        state.error("not a stream", f"{what} was recognised: {KEEP_ALIVES_ONLY}", 0)
    else:
        state.error("not a stream", f"{what} was recognised: the body is empty", 0)


def _looks_like(line: bytes) -> str:
    """Return what a body whose first stray line is line looks like, in words."""
    text = line.lstrip(b" \t")
    for magic, name in _COMPRESSED:
        if line.startswith(magic):  # a proxy that compressed it anyway (a gateway forwards it as it came)
            return f"the body is {name}-compressed (a Content-Encoding not undone?), not an event stream"
    if text[:1] == b"<":
        return "the body looks like HTML (an error page?), not an event stream"
    if text[:1] in (b"{", b"["):
        found = _format_of(text)
        if found is not None:
            return f"the body looks like {found} (JSON lines); pass format={found!r} or 'auto'"
        return "the body looks like a JSON document, not an event stream"
    if text[:5] == b"data:" or text[:6] == b"event:" or text[:1] == b":":  # SSE where JSON lines were expected
        found = _format_of(text[5:]) if text[:5] == b"data:" else None
        if found is not None:
            return f"the body looks like {found} (server-sent events); pass format={found!r} or 'auto'"
        return "the body looks like server-sent events, not JSON lines; pass format='auto'"
    return "the body is not an event stream"


def _format_of(text: bytes) -> str | None:
    """Return the format a JSON text's event belongs to, or None (not JSON, or of no known format)."""
    try:
        return _dispatch.detect(None, orjson.loads(text))
    except orjson.JSONDecodeError:
        return None
