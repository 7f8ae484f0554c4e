"""The general path for OpenAI-style chat-completion chunks: one parsed chunk in, fragments out.

The compiled twin handles the common shape of these chunks without parsing them into Python
objects; every chunk it does not fully understand comes here, as does every chunk the pure-Python
twin sees. Each field is read only when it has the type the API gives it; any other type is
reported as an "unexpected shape" and that item skipped, so nothing else is lost. An item
skipped that may have held a piece of a call or text (a choice, a delta, a tool call, its
function) cuts what is open, as an unreadable event does (shape_unreadable): a call is never handed
over without a piece, as arguments that may still parse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._turns.openai_chat import (CALL_KNOWN, CHOICE_KNOWN, DELTA_KNOWN, ENVELOPE, FUNCTION_KNOWN, NOT_EXTRA,
                                  ChatTurn, keep_first, merge_delta, note_logprobs)
from .._limits import event_not_an_object, shape_unreadable
from .inband import error_text

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink

TEXT_CONTENT, TEXT_REASONING, TEXT_REFUSAL = 0, 1, 2
_NOT_AN_EXTRA = NOT_EXTRA | frozenset(ENVELOPE)  # top-level keys that are no extra of the response
_ALL_ENVELOPE = sum(ENVELOPE.values())
# The envelope keys a turn still lacks, by its "have" bits: a chunk with none of them has nothing
# new for the envelope, told by one set look instead of a get per key.
_LACKING = tuple(frozenset(key for key, bit in ENVELOPE.items() if not have & bit) for have in range(_ALL_ENVELOPE + 1))
_TEXT_FIELDS = (("content", TEXT_CONTENT), ("reasoning_content", TEXT_REASONING),
                ("reasoning", TEXT_REASONING), ("refusal", TEXT_REFUSAL))


def handle_chunk(acc: Sink, state: StreamState, chunk: Any, offset: int | None) -> None:
    """Apply one parsed chat-completion chunk to the accumulator."""
    if type(chunk) is not dict:
        event_not_an_object(acc, state, f"a chunk must be a JSON object, got {type(chunk).__name__}", offset, chunk)
        return
    error = chunk.get("error")
    if error is not None:
        state.error("in-band error", error_text(error), offset, chunk)
        return
    turn = state.turn
    if turn is None:
        turn = state.turn = ChatTurn()
    _note_envelope(acc, turn, chunk)
    choices = chunk.get("choices")
    if choices:
        if type(choices) is not list:
            shape_unreadable(acc, state, "'choices' is not a list", offset, chunk)
        else:
            for choice in choices:
                _handle_choice(acc, state, turn, choice, offset)
    elif choices is not None and type(choices) is not list:
        shape_unreadable(acc, state, "'choices' is not a list", offset, chunk)
    usage = chunk.get("usage")
    if usage is not None:
        state.usage = usage


def _note_envelope(acc: Sink, turn: ChatTurn, chunk: dict) -> None:
    """Note the chunk's top-level fields: the first value of each, extras gaining keys (see ChatTurn)."""
    # Azure's content-filter chunks have an empty "object" (and id, model, created 0): the SDK skips
    # them; their extras (prompt_filter_results) are the response's, their envelope is not.
    envelope_too = chunk.get("object") != ""
    if _NOT_AN_EXTRA.issuperset(chunk):  # the common chunk: only the envelope fields to look at
        if envelope_too and not _LACKING[turn.have].isdisjoint(chunk):
            for key, known in ENVELOPE.items():
                value = chunk.get(key)
                if value is not None and not turn.have & known:
                    turn.envelope[key] = value
                    turn.have |= known
        return
    for key, value in chunk.items():
        if key in NOT_EXTRA or value is None:
            continue
        bit = ENVELOPE.get(key)
        if bit is None:
            # (counted only when it adds: most such fields come again in every chunk, the same)
            if keep_first(turn.envelope, key, value, dry=True) and acc.keep_own(value):
                keep_first(turn.envelope, key, value)
        elif envelope_too and not turn.have & bit:
            turn.envelope[key] = value
            turn.have |= bit


def _note_choice(acc: Sink, turn: ChatTurn, number: int, choice: dict) -> None:
    """Note a choice's logprobs and the keys callstitch does not read, within Limits.stream_bytes (keep_own)."""
    logprobs = choice.get("logprobs")
    record = turn.choices.get(number)
    held = record.extras if record is not None else {}
    # Counted only when it adds: Azure sends content_filter_results, the same shape, in every chunk.
    if not (type(logprobs) is dict or any(key not in CHOICE_KNOWN and keep_first(held, key, value, dry=True)
                                          for key, value in choice.items())) or not acc.keep_own(choice):
        return
    if type(logprobs) is dict:
        note_logprobs(turn.choice(number), logprobs)
    for key, value in choice.items():
        if key not in CHOICE_KNOWN:
            keep_first(turn.choice(number).extras, key, value)


def _handle_choice(acc: Sink, state: StreamState, turn: ChatTurn, choice: Any, offset: int | None) -> None:
    if type(choice) is not dict:
        shape_unreadable(acc, state, "a choice is not an object", offset, choice)
        return
    number = choice.get("index", 0)
    if type(number) is not int:
        shape_unreadable(acc, state, f"choice index {number!r} is not an integer", offset, choice)
        return
    # A choice past Limits.choices keeps nothing: the accumulator refuses its text, calls and
    # finish reason, and it gets no turn record (kept None).
    kept = turn if acc.admit_choice(number) else None
    if kept is not None and (choice.get("logprobs") is not None or not CHOICE_KNOWN.issuperset(choice)):
        _note_choice(acc, kept, number, choice)
    delta = choice.get("delta")
    if delta is not None:
        if type(delta) is dict:
            _handle_delta(acc, state, kept, number, delta, offset)
        else:
            shape_unreadable(acc, state, "'delta' is not an object", offset, choice)
    # A whole (non-streamed) response has "message" where a chunk has "delta": same fields.
    # Some servers send both in every chunk, the same fragment twice: with a delta, the
    # message is a copy of it, not a second source.
    message = choice.get("message") if delta is None else None
    if message is not None:
        if type(message) is dict:
            _handle_delta(acc, state, kept, number, message, offset)
        else:
            shape_unreadable(acc, state, "'message' is not an object", offset, choice)
    reason = choice.get("finish_reason")
    if reason is not None:
        if type(reason) is str:
            acc.choice_finished(number, reason)
            acc.complete(number, None)  # a finish reason closes the choice's calls
        else:
            state.error("unexpected shape", "'finish_reason' is not a string", offset, choice)


def _handle_delta(acc: Sink, state: StreamState, turn: ChatTurn | None, number: int, delta: dict,
                  offset: int | None) -> None:
    """Apply a choice's delta (or message): texts and calls to the accumulator, the rest to turn (None: not kept)."""
    calls = delta.get("tool_calls")
    if calls is None or len(delta) > 1:  # most deltas hold tool_calls alone: skip the text lookups
        for field, which in _TEXT_FIELDS:
            text = delta.get(field)
            if text is not None:
                if type(text) is str:
                    if which == TEXT_REASONING and turn is not None:
                        record = turn.choice(number)
                        if record.reasoning_key is None:
                            record.reasoning_key = field  # given back under the name it came with
                        elif record.reasoning_key != field and type(delta.get(record.reasoning_key)) is str:
                            # The same reasoning under both names (a server or proxy sends the old and
                            # the new): the choice's is the first name's; this one is kept as sent.
                            if acc.keep_own(text):
                                merge_delta(record.message, {field: text})
                            continue
                    acc.text_piece(number, which, text)
                else:
                    state.error("unexpected shape", f"'{field}' is not a string", offset, delta)
        legacy = delta.get("function_call")
        if legacy is not None:
            # The deprecated single-function form: one call per choice, no id, no index.
            if turn is not None:
                turn.choice(number).legacy = True
            _handle_function(acc, state, number, None, None, legacy, offset)
        if turn is not None and not DELTA_KNOWN.issuperset(delta):
            unknown = {key: value for key, value in delta.items() if key not in DELTA_KNOWN}
            if acc.keep_own(unknown):
                merge_delta(turn.choice(number).message, unknown)
    if calls is None:
        return
    if type(calls) is not list:
        shape_unreadable(acc, state, "'tool_calls' is not a list", offset, delta)
        return
    for call in calls:
        if type(call) is not dict:
            shape_unreadable(acc, state, "a tool call is not an object", offset, call)
            continue
        index = call.get("index")
        if index is not None and type(index) is not int:
            shape_unreadable(acc, state, f"tool call index {index!r} is not an integer", offset, call)
            continue
        call_id = call.get("id")
        if call_id is not None and type(call_id) is not str and type(call_id) is not int:
            state.error("unexpected shape", f"tool call id {call_id!r} is not a string", offset, call)
            call_id = None
        function = call.get("function")
        if function is not None:
            _handle_function(acc, state, number, index, call_id, function, offset)
        elif call.get("custom") is not None or call.get("type") == "custom":
            _handle_custom(acc, state, number, index, call_id, call.get("custom"), offset)
        else:
            acc.fragment(number, index, call_id, None, None)
        if turn is not None and (not CALL_KNOWN.issuperset(call)
                                 or (type(function) is dict and not FUNCTION_KNOWN.issuperset(function))):
            _note_call(acc, turn, number, index, call)  # after the piece: its call is known by then


def _note_call(acc: Sink, turn: ChatTurn, number: int, index: Any, call: dict) -> None:
    """Note a tool call's keys callstitch does not read, merged as the SDK merges a call's pieces.

    They are kept by the call's id or, while it has none, its position in the choice (a later
    piece without the id adds to them, as the SDK merges by index): what the accumulator says
    of the call the piece went to, whatever index the provider counts from.
    """
    extras = {key: value for key, value in call.items() if key not in CALL_KNOWN}
    function = call.get("function")
    if type(function) is dict:
        inner = {key: value for key, value in function.items() if key not in FUNCTION_KNOWN}
        if inner:
            extras["function"] = inner
    known = acc.call_at(number, index) if extras else None
    if known is not None and acc.keep_own(extras):  # (None: a limit refused the call, which keeps nothing)
        call_id, position = known
        record = turn.choice(number)
        merge_delta(record.calls.setdefault(("id", call_id) if call_id is not None else ("position", position), {}),
                    extras)


def _handle_function(acc: Sink, state: StreamState, number: int, index: Any, call_id: Any, function: Any,
                     offset: int | None) -> None:
    if type(function) is not dict:
        shape_unreadable(acc, state, "'function' is not an object", offset, function)
        return
    name = function.get("name")
    if name is not None and type(name) is not str:
        state.error("unexpected shape", f"function name {name!r} is not a string", offset, function)
        name = None
    acc.fragment(number, index, call_id, name, function.get("arguments"))


def _handle_custom(acc: Sink, state: StreamState, number: int, index: Any, call_id: Any, custom: Any,
                   offset: int | None) -> None:
    """One fragment of a custom (free-form) tool call: custom.name, and custom.input, text as sent."""
    if custom is not None and type(custom) is not dict:
        shape_unreadable(acc, state, "'custom' is not an object", offset, custom)
        return
    name = text = None
    if custom is not None:
        name, text = custom.get("name"), custom.get("input")
        if name is not None and type(name) is not str:
            state.error("unexpected shape", f"custom tool name {name!r} is not a string", offset, custom)
            name = None
        if text is not None and type(text) is not str:
            shape_unreadable(acc, state, "custom tool input is not a string", offset, custom)
            text = None
    acc.custom_fragment(number, index, call_id, name, text)


_TOP_QUIET = frozenset(("id", "object", "created", "model", "system_fingerprint", "service_tier", "choices",
                        "usage", "error", "obfuscation"))


def nothing_for_the_turn(turn: ChatTurn | None, chunk: dict, choice: dict, call: dict | None = None,
                         function: dict | None = None) -> bool:
    """Tell whether a one-choice chunk carries nothing the turn keeps (the pure twin's inline path asks).

    The twin of the compiled reader's rule (chat.h): no key callstitch has never heard of, no
    logprobs, no envelope field the turn does not know yet. choice, call and function hold the
    keys the inline path read (index and delta, index and function, arguments; a chunk that only
    ends its choice has no call), so a dict of only those, or of those with the choice's logprobs
    and finish_reason, needs no set look (each costs ~0.1-0.2 us, a chunk's whole parse ~1.3).
    """
    if not (_TOP_QUIET.issuperset(chunk)
            and (len(choice) == 2 or (len(choice) == 4 and "logprobs" in choice and "finish_reason" in choice)
                 or CHOICE_KNOWN.issuperset(choice))
            and (call is None or len(call) == 2 or CALL_KNOWN.issuperset(call))
            and (function is None or len(function) == 1 or FUNCTION_KNOWN.issuperset(function))
            ) or choice.get("logprobs") is not None:
        return False
    if chunk.get("object") == "":
        return False
    have = turn.have if turn is not None else 0
    if not _LACKING[have].isdisjoint(chunk):
        for key, bit in ENVELOPE.items():
            if not have & bit and chunk.get(key) is not None:
                return False
    return True


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one parsed event (the adapter interface)."""
    handle_chunk(acc, state, obj, offset)


def is_whole(obj: Any) -> bool:
    """Tell whether a JSON object is a chat completion not streamed (its choices' messages in it)."""
    return type(obj) is dict and obj.get("object") == "chat.completion" and type(obj.get("choices")) is list


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is an OpenAI-style chat-completion chunk."""
    return type(obj) is dict and ("choices" in obj or obj.get("object") == "chat.completion.chunk")
