"""Gemini streamGenerateContent (and Vertex AI): function calls whole, or built from partialArgs.

Gemini sends each functionCall part complete, arguments as an object. Vertex AI can stream the
arguments instead: a part ``{name, willContinue: true}`` opens a call, parts with ``partialArgs``
(a JSON path and a typed value each; a string continued over several parts when
``willContinue`` is set) build it, and a bare ``functionCall: {}`` closes it. A stream may end
without that close; the call is then taken as built.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import orjson

from .._limits import call_named, envelopes_full, event_not_an_object, shape_unreadable
from .._text import compact_json
from .._turns.gemini import CALL, CALL_KEYS, CALL_SIGNATURE, OTHER, RUN, TEXT_KEYS, GeminiTurn, choice_of
from .inband import error_text

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink

_PATH_TOKEN = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue", "structValue", "listValue")
_CUT = "\x00callstitch-cut\x00"
_CUT_JSON = b"\\u0000callstitch-cut\\u0000"


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is a Gemini response chunk."""
    return type(obj) is dict and ("candidates" in obj or "promptFeedback" in obj or "usageMetadata" in obj)


class State:
    """What a Gemini stream remembers between events."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open: dict[int, Builder] = {}  # choice -> its call whose arguments are being streamed


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Gemini response chunk."""
    if type(obj) is not dict:
        event_not_an_object(acc, state, "a chunk must be a JSON object", offset, obj)
        return
    if obj.get("error") is not None:
        state.error("in-band error", error_text(obj["error"]), offset, obj)
        return
    turn = state.turn
    if turn is None:
        turn = state.turn = GeminiTurn(acc.own_budget())
    candidates = obj.get("candidates")
    listed = candidates if type(candidates) is list else []
    if candidates is not None and type(candidates) is not list:  # they may have held a call's piece, a text's
        shape_unreadable(acc, state, "'candidates' is not a list", offset, obj)
    # A candidate past Limits.choices keeps nothing, in the turn neither; its finishReason still ends it.
    admitted = [type(candidate) is dict and acc.admit_choice(choice_of(candidate, position))
                for position, candidate in enumerate(listed)]
    turn.take_envelope(obj, admitted, state.event_size)
    for position, candidate in enumerate(listed):
        if type(candidate) is not dict:
            shape_unreadable(acc, state, "a candidate is not an object", offset, candidate)
            continue
        choice = choice_of(candidate, position)
        if admitted[position]:
            content = candidate.get("content")
            parts = content.get("parts") if type(content) is dict else None
            if type(parts) is list:
                _parts(acc, state, turn, choice, parts, offset)
            elif parts is not None or (content is not None and type(content) is not dict):
                shape_unreadable(acc, state, "a candidate's content is not an object with a list of parts", offset,
                                 candidate)
        reason = candidate.get("finishReason")
        if type(reason) is str:
            finish_choice(acc, state, choice, reason)
    if obj.get("usageMetadata") is not None:
        state.usage = obj["usageMetadata"]


def _parts(acc: Sink, state: StreamState, turn: GeminiTurn, choice: int, parts: list, offset: int | None) -> None:
    """Apply a candidate's parts: texts and calls to the accumulator, their places and the other parts to the turn."""
    for part in parts:
        if type(part) is not dict:
            shape_unreadable(acc, state, "a part is not an object", offset, part)
            continue
        call = part.get("functionCall")
        if type(call) is dict:
            _call_part(acc, turn, choice, part, call)
            _call(acc, state, choice, call, offset)
        elif call is not None:  # a call, or a piece of the one streaming, that cannot be read
            shape_unreadable(acc, state, "a functionCall is not an object", offset, part)
        elif _plain_text(part):
            _text_part(acc, turn, choice, part)
        else:
            if acc.keep_own(part):  # carried as sent, within Limits.stream_bytes (the turn's own fields)
                turn.event(acc, OTHER, choice, part)
            else:
                turn.gap(acc, choice)
            if type(part.get("text")) is str and part["text"]:  # (its text counts as text all the same)
                acc.text_piece(choice, 1 if part.get("thought") is True else 0, part["text"])


def _plain_text(part: dict) -> bool:
    """Tell whether a part is text (or thought text) only, which may join the text parts around it."""
    if type(part.get("text")) is not str or not part.keys() <= TEXT_KEYS:
        return False
    return type(part.get("thought", False)) is bool and type(part.get("thoughtSignature", "")) is str


def _text_part(acc: Sink, turn: GeminiTurn, choice: int, part: dict) -> None:
    text, signature = part["text"], part.get("thoughtSignature")
    which = 1 if part.get("thought") is True else 0
    if text or signature is not None:
        turn.event(acc, RUN, choice, which, signature)
        if text:
            acc.text_piece(choice, which, text)


def _call_part(acc: Sink, turn: GeminiTurn, choice: int, part: dict, call: dict) -> None:
    """Record a functionCall part in the turn: a call when it has a name, else a continuation of one."""
    signature = part.get("thoughtSignature")
    signature = signature if type(signature) is str else None
    name = call.get("name")
    if type(name) is str and name:
        part_extras = {key: value for key, value in part.items()
                       if key != "functionCall" and not (key == "thoughtSignature" and signature is not None)}
        call_extras = {key: value for key, value in call.items() if key not in CALL_KEYS}
        turn.event(acc, CALL, choice, signature, (part_extras, call_extras) if part_extras or call_extras else None)
    elif signature is not None:
        turn.event(acc, CALL_SIGNATURE, choice, signature)


def _call(acc: Sink, state: StreamState, choice: int, call: dict, offset: int | None) -> None:
    name, call_id = call.get("name"), call.get("id")
    if type(name) is str and name:
        start_call(acc, state, choice, name, call_id, call.get("willContinue") is True and "args" not in call,
                   call.get("args"))
        return
    building = open_call(state, choice)
    partial = call.get("partialArgs")
    if building is None:
        if partial is not None or call.get("args") is not None:
            state.error("unexpected shape", "functionCall arguments with no call open", offset, call)
        return  # a stray close, or a bare {"willContinue": true}
    if type(partial) is list:
        for entry in partial:
            if not building.apply(entry):
                unusable(acc, state, entry, offset, call)
                break  # (the call is cut: nothing more of it is kept)
    elif partial is not None:
        shape_unreadable(acc, state, "partialArgs is not a list", offset, call)
    elif not call:
        close_open(acc, state, choice)  # the bare functionCall: {} closes the call


def start_call(acc: Sink, state: StreamState, choice: int, name: str, call_id: Any, streamed: bool, args: Any) -> None:
    """A functionCall with a name: a whole call (args an object), or one whose arguments stream next."""
    close_open(acc, state, choice)
    if streamed:
        notes: State = state.notes
        notes.open[choice] = Builder(name, call_id if type(call_id) is str else None, acc.argument_room())
    else:
        _emit(acc, choice, call_id, name, args)


def open_call(state: StreamState, choice: int) -> Builder | None:
    """Return the call of a choice whose arguments are being streamed, if any."""
    notes: State = state.notes
    return notes.open.get(choice)


def unusable(acc: Sink, state: StreamState, entry: Any, offset: int | None, call: Any) -> None:
    """Record a partialArgs entry that could not be applied, and cut what is open: the call goes on without it."""
    shape_unreadable(acc, state, f"unusable partialArgs entry {entry!r}", offset, call)


def _emit(acc: Sink, choice: int, call_id: Any, name: str, args: Any, room: int = -1) -> None:
    # Every Gemini call is its own, however its id and name compare with those before it.
    acc.whole(choice, call_id if type(call_id) is str else None, name, args, room)


def close_open(acc: Sink, state: StreamState, choice: int) -> None:
    """Hand over the choice's streamed call, if one is open, as built so far."""
    notes: State = state.notes
    building = notes.open.pop(choice, None)
    if building is not None:
        text = building.text()
        room = -1
        if building.left < 0 and len(text) <= building.room:
            # Values set twice at one path went past the room though the text did not: the call is
            # cut all the same (its text a prefix that does not parse), and the limit said.
            state.error("limit", f"the streamed arguments of {call_named(building.id, building.name)} went "
                                 f"past {building.room} bytes (Limits.call_bytes, or what Limits.stream_bytes "
                                 "had left); the rest of them is dropped", None)
            room = building.room
        _emit(acc, choice, building.id, building.name, text, room)


def take_open(state: StreamState) -> list[tuple[int, str | None, str]]:
    """Forget the calls whose arguments are being streamed; return each one's (choice, id, name).

    For an accumulator cutting what an event over Limits.event_bytes may have held a piece of:
    the call is kept cut, with none of its arguments (they were only being assembled here).
    """
    notes = state.notes
    if type(notes) is not State or not notes.open:  # a stream of another format, or no call open
        return []
    open_calls, notes.open = notes.open, {}
    return [(choice, b.id, b.name) for choice, b in open_calls.items()]


def finish_choice(acc: Sink, state: StreamState, choice: int, reason: str) -> None:
    """A candidate's finishReason: its open call is complete, and so are all its calls."""
    close_open(acc, state, choice)
    acc.choice_finished(choice, reason)
    acc.complete(choice, None)


def close(acc: Sink, state: StreamState) -> None:
    """Take calls the stream never closed as they were built; say whether the envelopes went past their budget."""
    notes: State = state.notes
    for choice in list(notes.open):
        close_open(acc, state, choice)
    turn = state.turn
    if type(turn) is GeminiTurn and turn.settle():
        envelopes_full(state, turn.budget)


class Builder:
    """The arguments of one streamed call, assembled from (JSON path, typed value) entries.

    A string continued over several entries is gathered in ``pieces`` and written into the
    arguments when it closes (or when anything else comes): the compiled twin appends the
    pieces of a continued string to that list itself, while they fit in ``left``. Its interface
    with the compiled twin: ``open_text``, ``open_ok``, ``pieces``, ``left`` and ``put``.

    The arguments are held here until the call closes, so the limits bound them here: ``left``
    is what the accumulator's room for a call (Limits.call_bytes, or what Limits.stream_bytes has
    left) still allows, in characters of the values. The value that goes past it is kept and
    nothing after it: the call's text is then longer than the room, so the accumulator cuts it
    there, as it cuts any call that reaches a limit.
    """

    __slots__ = ("name", "id", "root", "open_path", "open_text", "open_ok", "pieces", "room", "left")

    def __init__(self, name: str, call_id: str | None, room: int) -> None:
        self.name = name
        self.id = call_id
        self.room = room
        self.left = room  # below 0: a value went past the room, and nothing more is kept
        self.root: dict = {}
        self.open_path: tuple | None = None  # the string still being continued …
        self.open_text: str | None = None    # … its jsonPath as sent …
        self.open_ok = True                  # … whether it could be set
        self.pieces: list[str] = []          # … and its pieces not yet written into root

    def apply(self, entry: Any) -> bool:
        """Apply one partialArgs entry; False when it cannot be used."""
        if type(entry) is not dict or type(entry.get("jsonPath")) is not str:
            return False
        for key in VALUE_KEYS:
            if key in entry:
                return self.put(entry["jsonPath"], key, entry[key], entry.get("willContinue") is True)
        return entry.get("willContinue") is True  # a bare continuation marker

    def put(self, text: str, key: str, value: Any, more: bool) -> bool:
        """Apply a typed value (key: stringValue, numberValue …) at the JSON path text; False when unusable."""
        left = self.left
        if left < 0:
            return True  # past the room: the call is cut there, whatever comes after
        path = _PATHS.get(text)
        if path is None:
            path = _parse_path(text)
            if path is None:
                return False
            if len(text) <= _PATH_KEPT_SIZE:  # (a long path is rare: not worth holding after the stream)
                if len(_PATHS) >= _PATHS_KEPT:
                    _PATHS.clear()
                _PATHS[text] = path
        string = key == "stringValue" and type(value) is str
        self.left = left = left - (len(value) if string else _least_length(value))
        if self.open_path is not None:
            if string and path == self.open_path:  # the next piece of the open string
                self.pieces.append(value)
                if not more:
                    self._flush()
                return self.open_ok
            self._flush()
        if key == "nullValue":
            value = None
        added = _set(self.root, path, value, left)
        if added:  # objects, keys or nulls made on the way, or the value was not set
            if added == PAST_ROOM:
                self.left = -1  # the nulls before the value take the text past the room: the call is cut there
                return True
            if added > 0:
                self.left = left - added
        ok = added >= 0
        if string and more:
            self.open_path, self.open_text, self.open_ok = path, text, ok
        return ok

    def _flush(self) -> None:
        """Write the open string's pending pieces into root, and close it."""
        if self.open_path is not None:
            if self.pieces:
                _set(self.root, self.open_path, _get(self.root, self.open_path) + "".join(self.pieces), 0)
                self.pieces = []
            self.open_path = self.open_text = None

    def text(self) -> bytes:
        """Return the arguments as JSON; cut inside the string when it was still being continued, or past the room."""
        if self.open_path is None:
            data = _serialise(self.root)
            # Past the room, the text must read as cut: a value set twice at one path may have
            # taken the room though the text stayed within it.
            return data[:-1] if self.left < 0 and len(data) <= self.room else data
        self.pieces.append(_CUT)
        self._flush()
        data = _serialise(self.root)
        # The stream ended inside a string value: keep what came, and let it read as truncated.
        cut = data.find(_CUT_JSON)
        return data if cut < 0 else data[:cut]


def _least_length(value: Any) -> int:
    """Return at most the length of a value's JSON text, cheaply: a streamed call is cut only past its room."""
    if type(value) is int:
        return (value.bit_length() - 1) * 3 // 10 + 1  # (log10 2 > 0.3: no more digits than it has)
    if type(value) is float or type(value) is bool or value is None:
        return 3
    return len(_serialise(value))


def _serialise(value: Any) -> bytes:
    """Return value as compact JSON; a lone surrogate (sent as a piece) is kept as its escape text.

    A value nested deeper than orjson writes (paths of hundreds of keys) is written without
    recursion; one that is both that deep and holds a lone surrogate reads as cut.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    try:
        return compact_json(value)  # too deep for orjson, or an integer beyond 64 bits
    except TypeError:
        pass
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")
    except RecursionError:
        return b"{"


# What _set returns besides the least text it added; the least text a padded null takes ("null,").
UNUSABLE, PAST_ROOM = -1, -2
_NULL_SIZE = 5

# Paths already parsed (the same few come again and again), up to a bound, and only short ones.
_PATHS: dict[str, tuple] = {}
_PATHS_KEPT = 4096
_PATH_KEPT_SIZE = 256


def _parse_path(path: str) -> tuple | None:
    if not path.startswith("$"):
        return None
    keys: list = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        name, number, single, double = match.groups()
        keys.append(int(number) if number is not None else name if name is not None else (single or double or ""))
        pos = match.end()
    return tuple(keys) if keys else None


def _get(root: Any, path: tuple) -> Any:
    try:
        for key in path:
            root = root[key]
    except (KeyError, IndexError, TypeError):
        return ""
    return root if type(root) is str else ""


def _set(root: dict, path: tuple, value: Any, room: int) -> int:
    """Set value at path in root, making the objects, lists and nulls on the way.

    Return the least text they add to the arguments (each object or list made "{}", each key
    made its quotes and colon, each null padding a list "null,"; an element's own place in a
    list is no padding), or UNUSABLE when the path cannot be. One small entry may name index
    10**9: when the nulls before it would pass room, only as many are made as take the text past
    it (so that the call is cut there, keeping a prefix of what was sent), the value is not set,
    and PAST_ROOM is returned.
    """
    key = path[0]
    if len(path) == 1 and type(key) is str:  # most paths are a key of the arguments' object ($.city)
        made = 0 if key in root else len(key) + 3
        root[key] = value
        return made
    node: Any = root
    added = 0
    last = len(path) - 1
    for i, key in enumerate(path):
        if type(key) is int:
            if type(node) is not list:
                return UNUSABLE
            size = len(node)
            if key >= size:
                if key > size:  # nulls before the element
                    nulls = key - size
                    fit = (room - added) // _NULL_SIZE + 1  # as many as take the text past room
                    if nulls > fit:
                        node.extend([None] * max(fit, 0))
                        return PAST_ROOM
                    added += nulls * _NULL_SIZE
                    node.extend([None] * nulls)
                node.append(None)  # the element's place, filled below
        elif type(node) is not dict:
            return UNUSABLE
        elif key not in node:
            added += len(key) + 3
        if i == last:
            node[key] = value
            return added
        child = node[key] if type(key) is int else node.get(key)
        if child is None:
            added += 2
            child = node[key] = [] if type(path[i + 1]) is int else {}
        node = child
    return UNUSABLE
