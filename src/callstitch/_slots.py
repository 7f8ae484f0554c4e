# cython: language_level=3, annotation_typing=False
# (Its C types come from _slots.pxd alone; the annotations are for readers and type checkers.)
"""The calls and texts of one stream, and the rules that route fragments to them: one definition for both twins.

Slot routing (which call a fragment belongs to, the quirks of ids, names and indexes), appending
within the limits, cutting, handing calls over and building the Result are written here once.
The pure twin runs this file as Python (loaded from its source, see _pure.py); the compiled
build compiles this same file with Cython, typed by _slots.pxd, and the compiled accumulator
derives from SlotBook, so its fast readers (_c/fast_*.pxi) write into these slots in C.
"""

from __future__ import annotations

from typing import Any

from ._formats import registry as _registry  # noqa: F401  first: the formats, then what they import (a cycle)
from ._formats import gemini as _gemini
from ._finalize import (Q_CHANGING_ID, Q_EMPTY_NAME, Q_INTEGER_ID, Q_MISSING_INDEX, Q_NAME_CHANGED,
                        Q_NEW_CALL_SAME_INDEX, Q_RESENT_ID, Q_RESENT_NAME, build_result, make_call,
                        one_choice_result, parses, raise_first_error)
from ._formats.recognition import unrecognised
from ._json_end import CutText, JsonEnd
from ._limits import (CUT_CALL_BYTES, CUT_EVENT_BYTES, CUT_STREAM_BYTES, FREE_NAME, call_cut, call_named, own_full,
                      stream_full, text_named, too_many)
from ._results import Result, ToolCall
from ._state import StreamState, finalized
from ._text import argument_bytes, compact_json, encode_fragment, escape_surrogate, json_size

__all__ = ["ChoiceState", "Slot", "SlotBook", "Text", "new_slot"]


class Slot:
    """One call being received: id, name and its argument bytes (new_slot makes one)."""

    __slots__ = ("choice", "seq", "position", "id", "name", "buf", "last_start", "nfrags", "cumulative",
                 "pending", "quirks", "call", "call_nfrags", "over", "shared", "parsed", "custom", "late", "end")
    # For type checkers (the compiled build's C types are in _slots.pxd); new_slot says what each holds.
    choice: Any
    seq: int
    position: int
    id: str | None
    name: str | None
    buf: bytearray
    last_start: int
    nfrags: int
    cumulative: list[int] | None
    pending: int
    quirks: int
    call: ToolCall | None
    call_nfrags: int
    over: int
    shared: bool
    parsed: Any
    custom: bool
    late: int
    end: JsonEnd | CutText | None


def new_slot(choice: Any, seq: int, position: int) -> Slot:
    """Return an empty slot: the seq-th call of the stream, the position-th of its choice.

    A function, not Slot.__init__: compiled, it fills the fields in C, without a call through the type.
    """
    slot = Slot.__new__(Slot)
    slot.choice = choice
    slot.seq = seq
    slot.position = position
    slot.id = None
    slot.name = None
    slot.buf = bytearray()
    slot.last_start = 0  # where the latest fragment starts in buf
    slot.nfrags = 0
    # Lengths of the fragments while each began with the one before (cumulative arguments);
    # while this holds, buf keeps only the latest fragment. None once it stops holding.
    slot.cumulative = None
    slot.pending = 0  # a high surrogate waiting for its low half
    slot.quirks = 0
    slot.call = None  # built when the protocol closed the call
    slot.call_nfrags = 0
    slot.over = 0  # the limit (a CUT_* code) its arguments reached: the rest is dropped
    slot.shared = False  # a call handed over holds buf: copy it before it changes (_unshare)
    slot.parsed = None  # the arguments as a value, when the call arrived whole with them parsed
    slot.custom = False  # an OpenAI custom tool call: its input text is the arguments, never parsed
    slot.late = 0  # first seen after an event lost (its CUT_* code: too big, unreadable), which may have held its start
    slot.end = None  # where its arguments' text stands as JSON, once asked whether they are complete (_complete)
    return slot


class ChoiceState:
    """The calls of one choice: by index, and the latest one."""

    __slots__ = ("by_index", "latest", "count", "open")
    by_index: dict[Any, Slot]
    latest: Slot | None
    count: int
    open: list[Slot]

    def __init__(self) -> None:
        self.by_index = {}
        self.latest = None
        self.count = 0
        self.open = []  # its calls perhaps not handed over yet (SlotBook._open says why)


class Text:
    """A choice's message text (content, reasoning or refusal) being received."""

    __slots__ = ("buf", "pending", "cut")
    buf: bytearray
    pending: int
    cut: bool

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pending = 0  # a high surrogate waiting for its low half
        self.cut = False  # a limit or a dropped event cut it: text after the cut would leave a hole


class SlotBook:
    """The calls and texts of one stream within its limits: the base of both twins' Accumulator.

    A twin frames the stream and sends each event to its format's adapter; the adapter (or the
    compiled twin's fast reader) calls the methods here. _end_of_stream is the twin's own.
    """

    # For type checkers (the compiled build's C types are in _slots.pxd); _start says what each holds.
    _state: StreamState
    _slots: list[Slot]
    _open: list[Slot]
    _choices: dict[Any, ChoiceState]
    _texts: dict[Any, list[Text | None]]
    _done: list[ToolCall]
    _result: Result | None
    _max_call: int
    _max_stream: int
    _max_calls: int
    _max_choices: int
    _max_event: int
    _kept: int
    _lazy: list[ToolCall] | None
    _lazy_bound: int
    _full: bool
    _dropped: int
    _capped: set[str] | None
    _own_kept: int
    _own_full: bool
    _nchoices: int
    _wholes: int
    _fed: bool
    _event_at: int

    def _start(self, state: StreamState, numbers: tuple) -> None:
        """Begin an empty stream: state is its StreamState, numbers its limits as as_numbers() gives them."""
        self._state = state
        (self._max_call, self._max_stream, self._max_calls, self._max_choices,
         self._max_event, state.error_limit) = numbers
        state.event_limit = self._max_event
        self._slots = []
        # The calls perhaps not handed over yet, in order (a call once handed over never opens again):
        # a stream repeating its finish must not walk every call each time (4,096 calls: n times 4,096).
        self._open = []
        self._choices = {}
        self._texts = {}  # choice -> [content, reasoning, refusal]: a Text each, or None
        self._done = []  # calls completed since feed last returned
        self._result = None
        self._kept = 0  # argument and text bytes held, against Limits.stream_bytes
        # Whole calls kept as sent (compiled twin): their bytes are counted when a limit comes near.
        self._lazy = None
        self._lazy_bound = 0  # an upper bound on what those take once re-encoded
        self._full = False  # Limits.stream_bytes was reached
        # An event was lost (the CUT_* code: too big for Limits.event_bytes, or unreadable): no text
        # is kept after it, nor a call that starts without its name.
        self._dropped = 0
        self._capped = None  # the limits on calls and choices already reported, once one is
        # The bytes of the events whose fields the turn keeps of its own (keep_own), against
        # Limits.stream_bytes apart from calls and texts; past it, none more is kept.
        self._own_kept = 0
        self._own_full = False
        self._nchoices = 0  # choices met, by their calls or their texts, against Limits.choices
        self._wholes = 0  # calls that arrived whole as text: each is keyed -1, -2, … (no protocol index is)
        self._fed = False  # a byte has been fed (an empty body is reported as one)
        # The stream offset of the event being handled, for the errors of the limits: each twin sets
        # it as it hands an event on (-1: none, as for a fragment added or a chunk fed as an object).
        self._event_at = -1

    def _end_of_stream(self) -> None:
        """Dispatch what the framing left pending and close the format (each twin frames its own)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- fragments in

    def add(self, index: int | None, *, id: str | int | None = None, name: str | None = None,
            arguments: Any = None, choice: int = 0) -> None:
        """Add one fragment of a call: the primitive the other ways in are built on."""
        if self._result is not None:
            raise finalized("add")
        self._event_at = -1
        if index is not None and type(index) is not int:
            raise TypeError(f"index must be an int or None, not {type(index).__name__}")
        if type(choice) is not int:
            raise TypeError(f"choice must be an int, not {type(choice).__name__}")
        if id is not None and type(id) is not str and type(id) is not int:
            raise TypeError(f"id must be a str, an int or None, not {type(id).__name__}")
        if name is not None and type(name) is not str:
            raise TypeError(f"name must be a str or None, not {type(name).__name__}")
        self.fragment(choice, index, id, name, arguments)

    def fragment(self, choice: Any, index: Any, call_id: Any, name: Any, arguments: Any) -> None:
        """Route one fragment to its slot (the quirk rules live here) and append its arguments."""
        if call_id is None and name is None and index is not None and type(arguments) is str:
            # The common continuation fragment: arguments for a call already known by its index.
            cs = self._choices.get(choice)
            slot = cs.by_index.get(index) if cs is not None else None
            if slot is not None and slot.nfrags and not slot.pending and slot.cumulative is None:
                cs.latest = slot  # type: ignore[union-attr]  # (a slot was found: cs is not None)
                if not arguments:
                    return
                try:
                    data = arguments.encode("utf-8")
                except UnicodeEncodeError:
                    pass
                else:
                    if not self._extend(slot, data):
                        self._append(slot, data)
                    return
        slot = self._route(choice, index, call_id, name, False)
        if slot is None or arguments is None or (type(arguments) is str and not arguments):
            return  # over a limit (recorded, and the fragment dropped), or nothing to append
        data, slot.pending, bits, problem = argument_bytes(arguments, slot.pending)
        slot.quirks |= bits
        if problem is not None:
            self._state.error("unexpected shape", problem, None)
            return
        self._append(slot, data)

    def custom_fragment(self, choice: Any, index: Any, call_id: Any, name: Any, text: Any) -> None:
        """Route one fragment of a custom (free-form) tool call; its input text is appended as sent."""
        slot = self._route(choice, index, call_id, name, False)
        if slot is None:
            return  # over a limit: recorded, and the fragment dropped
        slot.custom = True
        if text:
            data, slot.pending, bits, _ = argument_bytes(text, slot.pending)  # text: always a str
            slot.quirks |= bits
            self._append(slot, data)

    def identify(self, choice: Any, index: Any, call_id: str | None, name: str | None) -> None:
        """Give a known call the id and name it still lacks, from a later event that repeats its item.

        Only what the call lacks is taken, and no quirk is noted: repeating a call's id and name in
        a later event is the format's way (a Responses output_item.done), not a provider's quirk.
        """
        cs = self._choices.get(choice)
        slot = cs.by_index.get(index) if cs is not None else None
        if slot is None:
            return
        if call_id and slot.id is None and self._takes(slot, call_id):
            slot.id = call_id
            slot.call_nfrags = -1  # a call built already is built again, with it
        if name and slot.name is None and self._takes(slot, name):
            slot.name = name
            slot.call_nfrags = -1

    def whole(self, choice: Any, call_id: Any, name: Any, arguments: Any, room: int = -1) -> None:
        """Take a call that arrived whole (Ollama, Gemini), a call of its own, and hand it over.

        arguments: text, or a JSON value already parsed, which the call keeps instead of parsing
        its compact JSON again. room (>= 0): the adapter held the call to room bytes and it went
        past them (values set twice at one path, say: its text may be shorter): it is cut there.
        """
        if arguments is None or isinstance(arguments, (str, bytes, bytearray, memoryview)):
            self._wholes -= 1  # the text goes the way of fragments, under an index of its own
            key = self._wholes
            self.fragment(choice, key, call_id, name, arguments)
            if room >= 0:
                cs = self._choices.get(choice)
                slot = cs.by_index.get(key) if cs is not None else None
                if slot is not None and not slot.over:  # (the adapter said the limit: no error again)
                    slot.over = CUT_CALL_BYTES if room >= self._max_call else CUT_STREAM_BYTES
            self.complete(choice, key)
            return
        slot = self._route(choice, None, call_id, name, True)
        if slot is not None:  # else over a limit: recorded, and the call dropped
            self._whole_value(slot, arguments, None)

    def _whole_value(self, slot: Slot, arguments: Any, data: Any) -> None:
        """Keep a whole call's parsed arguments (data: their compact text, when known) and hand it over."""
        try:
            if data is None:
                data = compact_json(arguments)
        except TypeError as exc:
            self._state.error("unexpected shape", f"arguments are not JSON: {exc}", None)
        else:
            self._append(slot, data)
            if slot.nfrags == 1:
                slot.parsed = arguments
                if slot.call is None and not slot.quirks and type(arguments) is dict:
                    # What _settle and make_call give for it, without the copy and the calls.
                    slot.call = ToolCall(slot.id, slot.name, slot.choice, slot.position, arguments, data)
                    slot.call_nfrags = 1
                    self._done.append(slot.call)
                    return
        if slot.call is None:
            self._done.append(self._settle(slot, False))

    # ---------------------------------------------------------------- slot routing

    def _route(self, choice: Any, index: Any, call_id: Any, name: Any, whole: bool) -> Slot | None:
        """Find or start the slot a fragment belongs to, and take its id and name (the quirk rules).

        whole: a call that came whole, under no index: it gets a slot of its own. None when a
        limit on calls or choices keeps a new one from starting.
        """
        quirks = 0
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
            quirks |= Q_INTEGER_ID
        if call_id is not None and not call_id:
            call_id = None
        if name is not None and not name:
            name = None
            quirks |= Q_EMPTY_NAME
        cs = self._choices.get(choice)
        if cs is None:
            if not self._choice_fits(choice):
                return None
            cs = ChoiceState()
            self._choices[choice] = cs
        slot = self._find_slot(cs, choice, index, call_id, name, whole)
        if slot is None:
            return None
        cs.latest = slot
        if call_id is not None:
            if slot.id is None:
                if self._takes(slot, call_id):
                    slot.id = call_id
                    slot.call_nfrags = -1  # a call built already is built again, with it
            elif slot.id == call_id:
                quirks |= Q_RESENT_ID
            else:  # the index kept its call (_find_slot): the id that changed under it is dropped
                quirks |= Q_CHANGING_ID
        if name is not None:
            if slot.name is None:
                if self._takes(slot, name):
                    slot.name = name
                    slot.call_nfrags = -1  # a call built already is built again, with it
            elif slot.name == name:
                quirks |= Q_RESENT_NAME
            else:
                quirks |= Q_NAME_CHANGED
        slot.quirks |= quirks
        return slot

    def _find_slot(self, cs: ChoiceState, choice: Any, index: Any, call_id: Any, name: Any,
                   whole: bool) -> Slot | None:
        """Return the slot of a choice a fragment continues, or a new one when it starts another call.

        Without an index, a fragment continues the latest call unless its id or name says otherwise.
        Under a known index, a different id starts a new call only with a name or when the call's
        arguments are already complete (else the id is taken to be changing); a different name
        after arguments starts a new one. None when Limits.calls refuses the new one.
        """
        if whole:
            slot = self._new_slot(cs, choice, call_id, name)
            if slot is None:
                return _refused(cs, None)
            return slot
        if index is None:
            slot = cs.latest
            if slot is None or (call_id is not None and slot.id is not None and call_id != slot.id) or (
                    name is not None and slot.name is not None and name != slot.name and _had_arguments(slot)):
                slot = self._new_slot(cs, choice, call_id, name)
                if slot is None:
                    return _refused(cs, None)
            slot.quirks |= Q_MISSING_INDEX
            return slot
        slot = cs.by_index.get(index)
        if slot is None:
            slot = self._new_slot(cs, choice, call_id, name)
            if slot is None:
                return _refused(cs, None)
            cs.by_index[index] = slot
            return slot
        if (call_id is not None and slot.id is not None and call_id != slot.id and (name is not None or _complete(slot))) or (
                name is not None and slot.name is not None and name != slot.name and _had_arguments(slot)):
            slot = self._new_slot(cs, choice, call_id, name)
            if slot is None:
                return _refused(cs, index)
            cs.by_index[index] = slot
            slot.quirks |= Q_NEW_CALL_SAME_INDEX
        return slot

    def _new_slot(self, cs: ChoiceState, choice: Any, call_id: Any, name: Any) -> Slot | None:
        """Start a call in a choice, unless Limits.calls is reached (then None, and it is recorded)."""
        if len(self._slots) >= self._max_calls:
            self._cap("calls", call_named(call_id, name))
            return None
        slot = new_slot(choice, len(self._slots), cs.count)
        if self._dropped:
            if name is None:
                # A call starting without its name after a lost event: its start was in it. Keep none of it.
                slot.over = self._dropped
            else:
                slot.late = self._dropped
        cs.count += 1
        self._slots.append(slot)
        self._open.append(slot)
        cs.open.append(slot)
        return slot

    # ---------------------------------------------------------------- bytes in, within the limits

    def _append(self, slot: Slot, data: bytes) -> None:
        """Append one fragment's bytes, tracking whether the fragments are cumulative, within the limits."""
        n = len(data)
        if not n:
            return
        if slot.over:
            slot.call_nfrags = -1  # a piece past the cut: a call built before it is built again, as cut
            _follow_cut(slot, data)
            return
        if slot.shared:
            _unshare(slot)
        buf = slot.buf
        size = len(buf)
        cumulative = slot.cumulative
        prefix = b""
        # Once two fragments have grown the text, one that repeats it all still fits cumulative
        # sending (the complete text resent at the end); a second fragment equal to the first does not.
        continues = slot.nfrags == 0 or (cumulative is not None and (
            n > size or (n == size and len(cumulative) > 1)) and data.startswith(buf))
        if continues:
            grow = n - size
        elif cumulative is not None and len(cumulative) > 1:
            prefix = b"".join([buf[:k] for k in cumulative[:len(cumulative) - 1]])  # the text as sent, rebuilt
            grow = len(prefix) + n
        else:
            grow = n
        if size + grow > self._max_call:
            self._cut(slot, CUT_CALL_BYTES)
            _follow_cut(slot, data)
            return
        if self._stream_over(grow):
            self._cut(slot, CUT_STREAM_BYTES)
            _follow_cut(slot, data)
            return
        self._kept += grow
        if continues:
            if slot.nfrags == 0:
                slot.cumulative = [n]
                buf += data
            else:
                cumulative.append(n)  # type: ignore[union-attr]  # (continues with nfrags: cumulative is a list)
                buf[:] = data
        else:
            if prefix:
                buf[0:0] = prefix
            slot.cumulative = None
            slot.last_start = len(buf)
            buf += data
        slot.nfrags += 1

    def _extend(self, slot: Slot, data: bytes) -> bool:
        """Append a later fragment's bytes when only the limits apply to it, as _append would; False: use _append.

        Only the limits apply once a call has a fragment, is past cumulative tracking, has no
        surrogate pending and is neither cut nor shared: the pure twin's inline chat path takes
        its continuations here (the compiled twin's is _append_span, in C).
        """
        if slot.pending or slot.cumulative is not None or slot.over or slot.shared:
            return False
        buf = slot.buf
        size = len(buf)
        n = len(data)
        kept = self._kept + n
        if size + n > self._max_call or kept + self._lazy_bound > self._max_stream:
            return False
        self._kept = kept
        slot.last_start = size
        buf += data
        slot.nfrags += 1
        return True

    def _takes(self, slot: Slot, text: str) -> bool:
        """Count a call's id or name past its first FREE_NAME characters against Limits.stream_bytes; False past it.

        Each is held for the stream's whole life: uncounted, calls with ids or names of an
        event's size each would hold Limits.calls times Limits.event_bytes. Ordinary ones cost
        nothing (a cut call still takes the id and name that come after its cut); a longer one
        that does not fit is not kept, and its call is cut there.
        """
        grow = len(text) - FREE_NAME
        if grow <= 0:
            return True
        if self._stream_over(grow):
            if not slot.over:
                self._cut(slot, CUT_STREAM_BYTES)
            return False
        self._kept += grow
        return True

    def _stream_over(self, grow: int) -> bool:
        """Tell whether grow more bytes would pass Limits.stream_bytes, counting every call exactly."""
        if self._kept + self._lazy_bound + grow <= self._max_stream:
            return False
        if self._lazy is not None:
            # Near the limit: count what the calls kept as sent take once re-encoded.
            for call in self._lazy:
                self._kept += len(call.raw_arguments.encode())
            self._lazy = None
            self._lazy_bound = 0
        return self._kept + grow > self._max_stream

    def _cut(self, slot: Slot, limit: int) -> None:
        """Cut a call at a limit (a CUT_* code): nothing more of it is kept, and it reads as truncated."""
        slot.over = limit
        slot.call_nfrags = -1  # a call built already (handed over whole) is built again, as cut
        if limit == CUT_CALL_BYTES:
            call_cut(self._state, self._max_call, slot.id, slot.name, self._where())
        else:
            self._budget_spent(call_named(slot.id, slot.name))

    def no_event(self) -> None:
        """Say that what follows comes with no event of the stream (its end): a limit it reaches has no offset."""
        self._event_at = -1

    def _where(self) -> int | None:
        """Return the stream offset of the event being handled, or None when no event is."""
        return self._event_at if self._event_at >= 0 else None

    def _budget_spent(self, first: str) -> None:
        """Record, once, that Limits.stream_bytes is reached (first: what reached it, named for the error)."""
        if not self._full:
            self._full = True
            stream_full(self._state, self._max_stream, first, self._where())

    def _choice_fits(self, choice: Any) -> bool:
        """Tell whether a choice new to the calls or the texts fits Limits.choices, both counted together."""
        if choice in self._choices or choice in self._texts:
            return True
        if self._nchoices >= self._max_choices:
            self._cap("choices", f"choice {choice!r}")
            return False
        self._nchoices += 1
        return True

    def admit_choice(self, choice: Any) -> bool:
        """Tell whether a choice may be kept (a new one counts against Limits.choices); the Result lists each one kept.

        A choice's text, calls and finish reason admit it on their own; an adapter asks for a choice
        that said something else (only its role, or fields its turn record keeps), so that it is
        listed too, and keeps nothing of a choice refused.
        """
        if choice in self._choices or choice in self._texts:
            return True
        if not self._choice_fits(choice):
            return False
        self._choices[choice] = ChoiceState()  # listed, with no call (yet): its first call finds it here
        return True

    def calls_left(self) -> bool:
        """Tell whether a call may still start: Limits.calls is not reached."""
        return len(self._slots) < self._max_calls

    def call_at(self, choice: Any, index: Any) -> tuple[Any, int] | None:
        """Return the id (or None) and the position in its choice of the call a piece just went to; None if none.

        index: the piece's protocol index, or None for a piece without one (it went to the latest call).
        """
        cs = self._choices.get(choice)
        if cs is None:
            return None
        slot = cs.latest if index is None else cs.by_index.get(index)
        return None if slot is None else (slot.id, slot.position)

    def spend(self, size: int) -> bool:
        """Count size bytes the turn keeps of its own (a server tool's input) against Limits.stream_bytes; False: over.

        Over the limit, the limit is reported once and the caller keeps nothing more of that field.
        """
        if self._stream_over(size):
            self._budget_spent("a server tool's input")
            return False
        self._kept += size
        return True

    def keep_own(self, kept: Any) -> bool:
        """Tell whether the turn may keep kept, a field of its own of the event being handled (Limits.stream_bytes).

        The turn's own fields are counted apart from calls and texts (so that they take nothing
        from them), as the bytes of the events they came in: an event's size is counted once, by
        its first field asked (an event fed as an object has each field's JSON measured instead).
        Past the budget the limit is reported once, and the turn keeps none of its own fields
        from then on: they read as far as the budget went, never with a hole.
        """
        if self._own_full:
            return False
        state = self._state
        size = state.event_size
        if size < 0:
            size = json_size(kept)
        else:
            state.event_size = 0  # counted: the event's other fields are free
        if self._own_kept + size > self._max_stream:
            self._own_full = True
            own_full(state, self._max_stream, self._where())
            return False
        self._own_kept += size
        return True

    def own_budget(self) -> int:
        """Return Limits.stream_bytes as a number (no limit: one no stream reaches), for a turn that counts its own."""
        return self._max_stream

    def argument_room(self) -> int:
        """Return the most argument bytes a call started now may keep: Limits.call_bytes, or stream_bytes' rest."""
        # Never less than the room the call finds when it is handed over (a holder of more than this
        # cuts what it holds, and the call must then be cut there too): the compiled twin's calls
        # kept as sent (_lazy_bound, an upper bound) are left out, and _kept only grows.
        return min(self._max_call, max(self._max_stream - self._kept, 0))

    def choice_finished(self, choice: Any, reason: Any) -> None:
        """Record a choice's finish reason (none for a choice past Limits.choices): the stream ended as it should."""
        if self.admit_choice(choice):
            self._state.finish_reasons[choice] = reason
        self._state.complete = True

    def _cap(self, name: str, first: str) -> None:
        """Record, once, that a stream has more calls or choices than its limits allow (first: the first dropped)."""
        if self._capped is None:
            self._capped = set()
        if name not in self._capped:
            self._capped.add(name)
            too_many(self._state, name, self._max_calls if name == "calls" else self._max_choices, first,
                     self._where())

    def _read_as(self, framing: str) -> None:
        """Frame what is fed as framing, whatever its first bytes would tell; called before the first feed.

        For a batch source's response that its first bytes would misframe: in a capture of text,
        a response glued on after junk that starts with a zero byte is no AWS event stream.
        """
        self._state.framing = framing

    def cut_open(self, cause: int = CUT_EVENT_BYTES) -> None:
        """Cut every call still open and every text: the event just lost may have held a piece of them.

        cause: how it was lost, CUT_EVENT_BYTES (over Limits.event_bytes) or CUT_UNREADABLE.
        """
        for slot in self._slots:
            if not slot.over:
                # A call built whole already stays whole, unless a piece of it comes after all
                # (_append); one built broken (at [DONE], say) may have had its rest in the event,
                # and one built without its name may have had the name (a call may get it late).
                slot.over = cause
                if slot.call is not None and (slot.call.error is not None or slot.name is None):
                    slot.call_nfrags = -1
                slot.pending = 0  # a surrogate pending at the cut is cut with it
        for choice, call_id, name in _gemini.take_open(self._state):  # Vertex AI calls built from partialArgs
            self._wholes -= 1
            slot = self._route(choice, self._wholes, call_id, name, False)  # type: ignore[assignment]
            if slot is not None:
                slot.over = cause
        self._dropped = cause
        for texts in self._texts.values():
            for t in texts:
                if t is not None:
                    t.cut = True
                    t.pending = 0

    # ---------------------------------------------------------------- texts

    def text_piece(self, choice: Any, which: int, text: str) -> None:
        """Append message text (content, reasoning or refusal) of a choice."""
        t = self._text_buf(choice, which)
        if t is None:
            return
        if t.pending:
            data, t.pending, _ = encode_fragment(text, t.pending)
        else:
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data, t.pending, _ = encode_fragment(text, 0)
        if self._stream_over(len(data)):
            t.cut = True
            t.pending = 0  # a surrogate pending at the cut is cut with it
            self._budget_spent(text_named(choice, which))
            return
        self._kept += len(data)
        t.buf += data

    def _text_buf(self, choice: Any, which: int) -> Text | None:
        """Return the Text a piece of a choice's text goes to; None when none may be kept (a limit, a cut)."""
        texts = self._texts.get(choice)
        if texts is None:
            if not self._choice_fits(choice):
                return None
            texts = self._texts[choice] = [None, None, None]
        t = texts[which]
        if t is None:
            if self._dropped:
                return None  # an event was dropped before this text began: it may have held its start
            t = texts[which] = Text()
        elif t.cut:
            return None
        return t

    def text_length(self, choice: Any, which: int) -> int:
        """Return how many bytes of a choice's text are kept so far: where its next piece will start."""
        texts = self._texts.get(choice)
        t = texts[which] if texts is not None else None
        return 0 if t is None else len(t.buf)

    def _text_bytes(self, choice: Any) -> tuple | None:
        """Return a choice's (content, reasoning, refusal) as bytes or None (None for no text at all)."""
        parts = self._texts.get(choice)
        if parts is None:
            return None
        out: list[bytearray | None] = []
        for t in parts:
            if t is None:
                out.append(None)
                continue
            if t.pending:
                t.buf += escape_surrogate(t.pending).encode()
                t.pending = 0
            out.append(t.buf)
        return tuple(out)

    # ---------------------------------------------------------------- calls out

    def complete(self, choice: Any, index: Any) -> None:
        """Hand over the calls the protocol just closed: one (choice, index), a whole choice, or all."""
        if choice is None:
            self._complete_all()
            return
        cs = self._choices.get(choice)
        if cs is None:
            return
        if index is not None:
            slot = cs.by_index.get(index)
            if slot is not None and slot.call is None:
                self._done.append(self._settle(slot, False))
            return
        for slot in cs.open:
            if slot.call is None:
                self._done.append(self._settle(slot, False))
        cs.open = []

    def _complete_all(self) -> None:
        """Hand over every call not yet handed over (what complete(None, None) does)."""
        for slot in self._open:
            if slot.call is None:
                self._done.append(self._settle(slot, False))
        self._open = []

    def _settle(self, slot: Slot, final: bool) -> ToolCall:
        """Return the slot's finished call, built once (again only if fragments, an id or a name came after it)."""
        if slot.pending:  # a high surrogate never joined: keep its escape text
            self._append(slot, escape_surrogate(slot.pending).encode())
            slot.pending = 0
        if slot.call is None or slot.call_nfrags != slot.nfrags:
            # Built again when a later fragment brought arguments, an id or a name (_route), even with no
            # arguments kept (an empty piece, or one a limit cut). The call takes the buffer itself, not a copy (a call can
            # be as big as Limits.call_bytes); before the end it may still grow: then it is copied first.
            cumulative = slot.cumulative if final or slot.cumulative is None else list(slot.cumulative)
            slot.call = make_call(slot.choice, slot.position, slot.id, slot.name, slot.buf, cumulative,
                                  slot.last_start, slot.quirks, slot.over, slot.parsed if slot.nfrags == 1 else None,
                                  slot.custom, self._long_run(slot.buf), slot.late)
            slot.call_nfrags = slot.nfrags
            slot.shared = not final
        return slot.call

    def _long_run(self, buf: bytearray) -> Any:
        """Tell make_call whether buf may hold a number too long for a float; None: it looks itself."""
        return None

    # ---------------------------------------------------------------- the end

    def finalize(self, strict: bool = False) -> Result:
        """Return the Result: every call parsed once; with strict=True raise the first error instead.

        The stream ends here: a second call returns the same Result, and feed(), feed_chunk() or
        add() after it raise RuntimeError.
        """
        if self._result is None:
            self._result = self._build()
        if strict:
            raise_first_error(self._result)
        return self._result

    def _build(self) -> Result:
        """End the stream and build its Result from every slot and text."""
        self._end_of_stream()
        self._event_at = -1
        if not self._state.recognised:
            unrecognised(self._state, bool(self._slots or self._texts), self._fed)
        if _zero_keys(self._choices) and _zero_keys(self._texts) and _zero_keys(self._state.finish_reasons):
            # Plainly one choice, the common case: no (choice, seq, call) tuples to group.
            # (choice 0 admitted with no text, its calls refused by a limit say, is listed all the same)
            first = self._text_bytes(0) if 0 in self._texts or 0 not in self._choices else (None, None, None)
            return one_choice_result([self._settle(s, True) for s in self._slots], first, self._state)
        texts = {choice: self._text_bytes(choice) for choice in self._texts}
        for choice in self._choices:  # every choice admitted is listed, one whose calls a limit refused too
            texts.setdefault(choice, None)
        return build_result([(s.choice, s.seq, self._settle(s, True)) for s in self._slots], texts, self._state)


def _unshare(slot: Slot) -> None:
    """Give the slot a buffer of its own before it changes: the call handed over keeps the one it has."""
    slot.buf = bytearray(slot.buf)
    slot.shared = False


def _refused(cs: ChoiceState, index: Any) -> Slot | None:
    """Forget the call a refused new one would have replaced, so no fragment meant for it goes there; return None."""
    cs.latest = None
    if index is not None:
        del cs.by_index[index]
    return None


def _had_arguments(slot: Slot) -> bool:
    """Tell whether argument bytes came for a slot, kept or not (a cut must not move where the next call starts)."""
    # Only a non-empty fragment reaches a size limit (_cut); an event dropped (cut_open) says nothing.
    return slot.nfrags > 0 or slot.over == CUT_CALL_BYTES or slot.over == CUT_STREAM_BYTES


def _follow_cut(slot: Slot, data: bytes) -> None:
    """Read a piece a size limit dropped (CutText), so that _complete still knows where the text as sent ends."""
    if slot.over != CUT_CALL_BYTES and slot.over != CUT_STREAM_BYTES:
        return  # cut at a dropped event: what that event held was never seen, so none of it is followed
    end = slot.end
    if not isinstance(end, CutText):
        pieces = -1  # how many cumulative pieces it has kept (-1: not sent cumulatively)
        if not slot.nfrags:
            pieces = 0  # none kept yet: the first would have begun cumulative tracking, as _append does
        elif slot.cumulative is not None:
            pieces = len(slot.cumulative)
        end = slot.end = CutText(slot.buf, pieces, slot.cumulative)
    end.read(data)


def _complete(slot: Slot) -> bool:
    """Tell whether a slot's arguments already form a complete JSON value (each byte read once: _json_end)."""
    end = slot.end
    if isinstance(end, CutText):
        # A size limit cut it: the text kept is a prefix; whether the text as sent is complete (_follow_cut).
        return end.complete()
    if slot.cumulative is not None:
        return len(slot.buf) > 0 and parses(slot.buf)  # (its text may yet be replaced whole: read it all)
    if end is None:
        end = slot.end = JsonEnd()
    return end.ask(slot.buf)


def _zero_keys(d: dict) -> bool:
    """Tell whether a dict's keys are at most the integer 0 (a choice number)."""
    for key in d:
        if type(key) is not int or key:
            return False
    return True
