"""The OpenAI chat turn: the ``chat.completion`` object and the assistant message of a request.

The calls and the texts (content, reasoning, refusal) come from the Result; everything else the
stream said is in a ChatTurn, which the adapter (_formats/openai_chat.py) fills as chunks arrive.
The merge follows openai-python's ChatCompletionStreamState: the envelope of the first chunk, the
deltas merged key by key (strings joined, numbers added, objects merged, indexed lists by index),
logprobs lists concatenated, the last finish reason and usage. Where callstitch departs from it
(a later chunk's top-level extras such as ``x_groq.usage``, a choice's extras such as vLLM's
``stop_reason``, normalised call ids and names) the README lists it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .fresh import fresh

# The envelope fields of a chunk a chat.completion carries, as bits of ChatTurn.have (the compiled
# reader sends a chunk down the general path while one it carries is not yet known: chat.h's CS_ENV_*).
ENVELOPE = {"id": 1, "created": 2, "model": 4, "system_fingerprint": 8, "service_tier": 16}
# Top-level keys that are not the response's: the choices and usage are read on their own, an
# in-band error is an error, "obfuscation" is padding (the SDK drops it too), "object" is renamed.
NOT_EXTRA = frozenset(("choices", "usage", "error", "obfuscation", "object"))
# Keys of a choice, a delta and a tool call the adapter reads itself; any other is an extra.
CHOICE_KNOWN = frozenset(("index", "delta", "message", "finish_reason", "logprobs"))
DELTA_KNOWN = frozenset(("role", "content", "reasoning_content", "reasoning", "refusal", "tool_calls",
                         "function_call"))
CALL_KNOWN = frozenset(("index", "id", "type", "function", "custom"))
FUNCTION_KNOWN = frozenset(("name", "arguments"))


class ChoiceTurn:
    """What one choice said besides its texts and calls.

    extras: the choice's own keys callstitch does not read (first value kept, objects gain the
    keys later chunks add); message: the delta's unknown keys (annotations, audio, …), merged as
    the SDK merges deltas; reasoning_key: "reasoning_content" or "reasoning", whichever the
    server sent first; logprobs: the choice's logprobs, content and refusal lists concatenated;
    calls: each call's unknown keys (``extra_content`` with Gemini's thought signature …), by
    ("id", the call's id) or, while it had none, ("position", its position in the choice);
    legacy: the calls came as the deprecated ``function_call``.
    """

    __slots__ = ("extras", "message", "reasoning_key", "logprobs", "calls", "legacy")

    def __init__(self) -> None:
        self.extras: dict[str, Any] = {}
        self.message: dict[str, Any] = {}
        self.reasoning_key: str | None = None
        self.logprobs: dict[str, Any] | None = None
        self.calls: dict[Any, dict[str, Any]] = {}
        self.legacy = False

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


class ChatTurn:
    """What a chat stream said besides its calls, texts, finish reasons and usage.

    envelope: the top-level fields of the response (id, created, model, system_fingerprint,
    service_tier: the first value sent; extras such as ``x_groq``: the first value, objects gaining
    the keys later chunks add); have: ENVELOPE bits of the fields known; choices: a ChoiceTurn per
    choice index, made when a choice says something that needs one.
    """

    __slots__ = ("envelope", "have", "choices")

    def __init__(self) -> None:
        self.envelope: dict[str, Any] = {}
        self.have = 0
        self.choices: dict[int, ChoiceTurn] = {}

    def choice(self, number: int) -> ChoiceTurn:
        """Return the record of choice number, made on first use."""
        record = self.choices.get(number)
        if record is None:
            record = self.choices[number] = ChoiceTurn()
        return record

    def __getstate__(self) -> tuple:
        return (self.envelope, self.have, self.choices)

    def __setstate__(self, state: tuple) -> None:
        self.envelope, self.have, self.choices = state


def keep_first(into: dict, key: Any, value: Any, dry: bool = False) -> bool:
    """Keep value under key unless one is there; objects gain the keys they lack (x_groq's later usage).

    Return whether anything new was kept; dry: only tell whether it would be (what a field is counted for).
    """
    kept = False
    pending = [(into, key, value)]  # a stack, not a recursion: an object may be nested 1,024 levels deep
    while pending:
        into, key, value = pending.pop()
        if value is None:
            continue
        held = into.get(key)
        if held is None:
            if dry:
                return True
            into[key] = value
            kept = True
        elif type(held) is dict and type(value) is dict:
            pending.extend((held, inner, inner_value) for inner, inner_value in value.items())
    return kept


def merge_delta(into: dict, delta: dict) -> None:
    """Merge one delta's keys into what the earlier ones gave, as openai-python's accumulate_delta does.

    A key not held (or held as null) takes the value; "index" and "type" are replaced; strings
    are joined and numbers added; objects merge; lists of objects with an "index" merge entry by
    index, other lists are extended. Joined strings and lists, extended or merged into, are held
    as Growing until read (owned() gives their value), so that a stream of n pieces costs n, not n
    squared: a list is read whole at most once, when a delta first merges into it.

    The nested objects are merged from a queue, not by recursion (an object may be nested 1,024
    levels deep): first in, first out, so that pieces for one object merge in the order sent.
    """
    pending = deque([(into, delta)])
    while pending:
        into, delta = pending.popleft()
        for key, value in delta.items():
            held = into.get(key)
            if held is None:
                if _indexed(value):
                    held = into[key] = []
                else:
                    into[key] = fresh(value)
                    continue
            if key == "index" or key == "type":
                into[key] = value
            elif type(held) is Growing and not held.indexed(value):
                held.grow(value)
            elif type(held) is Growing:
                # A list extended with objects, or still empty when indexed objects come: from now
                # on merged entry by index, as the SDK does.
                held.merge(value, pending)
            elif type(held) is str and type(value) is str:
                into[key] = Growing(held, value, True)
            elif _number(held) and _number(value):
                into[key] = held + value
            elif type(held) is dict and type(value) is dict:
                pending.append((held, value))
            elif type(held) is list and type(value) is list:
                # A list as one value sent it, merged into for the first time: read whole this once,
                # then held as a Growing that knows what it holds, so no later delta reads it again
                # (the SDK rereads it on each: a long list then many short deltas cost their product).
                if _scalars(held) and (held or not _indexed(value)):
                    into[key] = Growing(held, fresh(value), False)
                else:
                    Growing.by_index(into, key, held).merge(value, pending)
            # Any other pairing (a string then an object, say) keeps what was held, as the SDK does.


class Growing:
    """A string being joined or a list being extended (kept as its pieces) or merged into by index, until read.

    The SDK joins (or extends) on every delta, which copies all that came before each time, and
    rereads the whole list to tell whether it holds scalars alone: a hostile stream of many small
    pieces would cost the square of its length. A list's Growing keeps that answer as it goes
    instead: mixed, it holds more than scalars (then it is one list, merged into by index); size,
    how many items it holds. Only merge_delta makes one, only in a ChoiceTurn's message and calls;
    owned() reads it. Pickled as its value.
    """

    __slots__ = ("pieces", "text", "mixed", "size")

    def __init__(self, first: Any, second: Any, text: bool) -> None:
        self.pieces = [first, second]
        self.text = text  # True: str pieces, joined; False: lists, concatenated
        self.mixed = not text and not _scalars(second)  # the list now holds more than scalars
        self.size = 0 if text else len(first) + len(second)

    @classmethod
    def by_index(cls, into: dict, key: Any, held: list) -> Growing:
        """Hold into[key], a list merged by index from now on (it holds more than scalars, or nothing), as a Growing."""
        grown = into[key] = cls.__new__(cls)
        grown.pieces = [held]
        grown.text = False
        grown.mixed = bool(held)  # not empty: merge_delta found more than scalars in it
        grown.size = len(held)
        return grown

    def indexed(self, value: Any) -> bool:
        """Tell whether value must be merged by index into the list held (the list is no longer scalars alone)."""
        return not self.text and (self.mixed or (not self.size and _indexed(value)))

    def grow(self, value: Any) -> None:
        """Add a later delta's value the way the SDK merges it into what is held."""
        if self.text:
            if type(value) is str:
                self.pieces.append(value)
        elif type(value) is list:
            # A list held whole of scalars takes any later list as it is (the SDK extends it).
            self.pieces.append(fresh(value))
            self.mixed = not _scalars(value)
            self.size += len(value)

    def merge(self, value: Any, pending: deque) -> None:
        """Merge a later delta's list into the list held, entry by index (merge_delta's queue: pending)."""
        if len(self.pieces) > 1:
            self.pieces = [[item for piece in self.pieces for item in piece]]  # once: then merged in place
        held = self.pieces[0]
        if type(value) is list:
            _merge_list(held, value, pending)
        self.size = len(held)
        # It held more than scalars, or nothing, and _merge_list adds objects only: not empty is mixed.
        self.mixed = self.size > 0

    def value(self) -> Any:
        """Return the joined string or the list (a new one each time, any Growing in its entries read)."""
        if self.text:
            return "".join(self.pieces)
        items = [item for piece in self.pieces for item in piece]
        # Entries merged into by index may hold a Growing of their own (fresh reads the outer one only).
        return fresh(items, Growing) if self.mixed else items

    def __reduce__(self) -> tuple:
        return (_unpickled, (self.value(),))


def _unpickled(value: Any) -> Any:
    return value  # a pickled Growing comes back as the value it had


def owned(value: Any) -> Any:
    """Return a value of a ChoiceTurn's message or calls for the caller: Growing read, dicts and lists copied."""
    return fresh(value, Growing)


def _merge_list(held: list, value: list, pending: deque) -> None:
    """Merge a list of indexed objects into held entry by entry, objects by merge_delta's queue (pending)."""
    for entry in value:
        if type(entry) is not dict or type(entry.get("index")) is not int:
            continue  # the SDK raises here; a stream that does this keeps what it had
        index = entry["index"]
        if -len(held) <= index < len(held):  # (a negative index counts from the end, as the SDK's does)
            if type(held[index]) is dict:
                pending.append((held[index], entry))
        else:
            # Past the end, added there, as the SDK does. Before the start, too: the SDK inserts it
            # at the front, a move of the whole list per entry, which a stream of them makes quadratic.
            held.append(fresh(entry))


def _scalars(held: list) -> bool:
    return all(type(x) in (str, int, float) for x in held)


def _indexed(value: Any) -> bool:
    return type(value) is list and any(type(x) is dict and "index" in x for x in value)


def _number(value: Any) -> bool:
    return type(value) is int or type(value) is float  # not bool: the SDK would add True + True


def note_logprobs(record: ChoiceTurn, logprobs: dict) -> None:
    """Add a chunk's logprobs to the choice's: the first as sent, then content and refusal concatenated."""
    held = record.logprobs
    if held is None:
        record.logprobs = fresh(logprobs)
        return
    for key in ("content", "refusal"):
        more = logprobs.get(key)
        if more:
            if type(held.get(key)) is list:
                held[key].extend(fresh(more))
            else:
                held[key] = fresh(more)


# ---------------------------------------------------------------- building the objects

def response(result: Any, turn: ChatTurn | None) -> dict[str, Any]:
    """Return the chat.completion object the request would have returned without streaming."""
    envelope = turn.envelope if turn is not None else {}
    out: dict[str, Any] = {"id": envelope.get("id"), "object": "chat.completion",
                           "created": envelope.get("created"), "model": envelope.get("model")}
    choices = []
    for choice in result.choices:
        record = turn.choices.get(choice.index) if turn is not None else None
        entry: dict[str, Any] = {}
        if record is not None:
            entry.update(fresh(record.extras))
        entry["index"] = choice.index
        entry["message"] = _message(result, choice, record)
        entry["logprobs"] = fresh(record.logprobs) if record is not None else None
        entry["finish_reason"] = choice.finish_reason
        choices.append(entry)
    out["choices"] = choices
    out["usage"] = fresh(result.usage)
    out["system_fingerprint"] = envelope.get("system_fingerprint")
    for key, value in envelope.items():
        if key not in out:
            out[key] = fresh(value)
    return out


def message(result: Any, turn: ChatTurn | None, choice: int) -> dict[str, Any]:
    """Return choice's assistant message as the next request's history takes it."""
    for each in result.choices:
        if each.index == choice:
            break
    else:
        if choice == 0:
            # A stream cut or failed before its first content (an in-band error, a role-only chunk):
            # an empty turn, as every other format gives, not a crash in the caller's history code.
            return {"role": "assistant", "content": None}
        raise IndexError(f"the stream has no choice {choice} (its choices: {[c.index for c in result.choices]})")
    record = turn.choices.get(choice) if turn is not None else None
    said = _message(result, each, record)
    out: dict[str, Any] = {"role": "assistant", "content": said.get("content")}
    if said.get("refusal") is not None:
        out["refusal"] = said["refusal"]
    if record is not None and record.reasoning_key is not None and each.reasoning is not None:
        out[record.reasoning_key] = each.reasoning  # DeepSeek-style servers want it back
    if "tool_calls" in said:
        out["tool_calls"] = [_call_param(call) for call in said["tool_calls"]]
    if "function_call" in said:
        out["function_call"] = said["function_call"]
    audio = said.get("audio")
    if type(audio) is dict and type(audio.get("id")) is str:
        # An audio answer goes back by its id alone (the request's Audio param): the server keeps its data.
        out["audio"] = {"id": audio["id"]}
    return out


def _call_param(call: dict) -> dict:
    # The request takes a call as the response gave it; extras such as Gemini's
    # extra_content.google.thought_signature must go back with it, byte for byte.
    return fresh(call)


def _message(result: Any, choice: Any, record: ChoiceTurn | None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": choice.text, "refusal": choice.refusal}
    if record is not None:
        for key, value in record.message.items():
            out.setdefault(key, owned(value))
    if choice.reasoning is not None:
        key = record.reasoning_key if record is not None and record.reasoning_key else "reasoning_content"
        out[key] = choice.reasoning
    calls = [call for call in result.tool_calls if call.choice == choice.index]
    if record is not None and record.legacy and calls and calls[0].id is None:
        legacy = calls.pop(0)
        out["function_call"] = {"name": legacy.name, "arguments": legacy.raw_arguments}
    if calls:
        out["tool_calls"] = [_call(call, record) for call in calls]
    return out


def _call(call: Any, record: ChoiceTurn | None) -> dict[str, Any]:
    if call.kind == "custom":
        out: dict[str, Any] = {"id": call.id, "type": "custom",
                               "custom": {"name": call.name, "input": call.raw_arguments}}
    else:
        out = {"id": call.id, "type": "function",
               "function": {"name": call.name, "arguments": call.raw_arguments}}
    if record is not None and record.calls:
        for extras in (record.calls.get(("id", call.id)), record.calls.get(("position", call.index))):
            if not extras:
                continue
            for key, value in extras.items():
                if (key == "function" or key == "custom") and key in out:
                    for inner, inner_value in value.items():
                        out[key].setdefault(inner, owned(inner_value))
                else:
                    out.setdefault(key, owned(value))
    return out
