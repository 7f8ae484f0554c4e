"""The Gemini turn: a GenerateContentResponse (REST JSON, camelCase) and a {"role": "model", "parts"} Content.

How streamed chunks merge into the one response. Each chunk of streamGenerateContent is a
GenerateContentResponse holding the new parts only; the clients differ in how they join them:
google-genai's chat keeps every chunk's Content as it came (one history entry per chunk, no
joining), the Vercel AI SDK joins text deltas into one text or reasoning block per run and keeps a
part's thoughtSignature as that block's provider metadata, and LangChain concatenates the text.
The non-streamed API returns the text of a run as one part, with the signature on the part it
signs. The rule here, which gives that shape:

- parts keep the order they came in, per candidate (``index``);
- consecutive text parts of the same kind (``thought: true`` or not) join into one part; a part
  that carries a ``thoughtSignature`` ends its run, so the signature stays on the text it came
  with and two signatures never meet in one part; an empty text part without a signature adds
  nothing;
- a functionCall part is whole: name, id and args (the call as reassembled, streamed
  ``partialArgs`` included), with the signature of the part that opened it;
- any other part (inlineData, executableCode, codeExecutionResult, a kind not known here, a text
  part with fields besides text/thought/thoughtSignature) is carried as sent;
- a candidate's other fields (finishReason, finishMessage, safetyRatings, groundingMetadata,
  urlContextMetadata, avgLogprobs, logprobsResult, unknown ones …) and the top-level ones
  (promptFeedback, modelVersion, responseId, createTime, unknown ones) are the last value sent,
  except the citations of citationMetadata, which add up (each once); usageMetadata is the last
  one, as the API's counts are cumulative. A finishReason is absent when none was sent.

The texts are slices of the choice's text the accumulator keeps (``text_length`` positions), not
copies; the calls are those of ``result.tool_calls``.
"""

from __future__ import annotations

from typing import Any

from .._exactjson import loads_exact
from .._limits import UNLIMITED
from .._text import json_size
from .fresh import fresh

TEXT_KEYS = frozenset(("text", "thought", "thoughtSignature"))
CALL_KEYS = frozenset(("name", "id", "args", "willContinue", "partialArgs"))
PART_CALL_KEYS = frozenset(("functionCall", "thoughtSignature"))
_SKIPPED_TOP = ("candidates", "usageMetadata", "error")
_CITATION_LISTS = ("citationSources", "citations")


# The events a stream's turn logs, in order: (kind, choice, content length, thought length, a, b).
# The lengths are acc.text_length(choice, 0 / 1) before the part: where an open text run ends.
RUN, CALL, OTHER, CALL_SIGNATURE, ENVELOPE = 0, 1, 2, 3, 4
# Envelopes logged before they are folded: a stream whose envelope changes with every chunk (a
# hostile one, or one of many candidates) keeps at most this many, or this many bytes of chunks,
# not one per chunk. Folding parses them, which a stream read for its calls only never needs: a
# real stream never gets here.
FOLD_AT = 1024
FOLD_BYTES = 1 << 20
_NO_RUN = (0, None, -1)  # GeminiTurn.open_run when no unsigned text run is open


def _counted(kind: int, a: Any, b: Any) -> bool:
    """Tell whether a part's entry counts against the turn's budget: all but a bare call's and OTHER's.

    A call noted bare (no signature, no fields of its own) is bounded by Limits.calls, as the
    call is; an OTHER entry's part is counted by its caller (a gap keeps nothing).
    """
    return kind == RUN or kind == CALL_SIGNATURE or (kind == CALL and (a is not None or b is not None))


class GeminiTurn:
    """The rest of a Gemini turn: a log of the parts' places and the chunks' envelopes, read at the end.

    log holds tuples ``(kind, choice, length0, length1, a, b)``: RUN (a text part of kind a, 0
    content, 1 thought, signature b or None: a run of that kind starts, or goes on), CALL (a
    functionCall part naming a call: signature a, extras b: the part's and the functionCall's
    other fields, or None), OTHER (a part carried as sent: a), CALL_SIGNATURE (a signature a on a
    part continuing a call), ENVELOPE (a chunk but its parts and usageMetadata: a dict, or its JSON
    text with those values null). The log costs the stream an append per run, call and changed
    envelope, nothing per text piece; the parts are joined when the turn is read.

    envelope: the last envelope logged (a dict, or the compiled twin's text), so that a chunk
    repeating it logs nothing. A RUN entry is logged only where a run starts or is signed: one that
    goes on with the open unsigned run changes nothing (open_run: that run's choice and kind, and
    the log's length after its entry or an envelope's, while nothing else has been logged since; the
    compiled twin appends part entries itself and keeps its own note).
    folded: what the envelopes taken out of the log said (the top-level fields, and per candidate
    a record with no parts), or None; pending, pending_bytes: the envelopes logged since, and the
    bytes of their chunks; clean: the length of the log's start that holds no envelope (what the
    last fold left), which the next fold need not read. An envelope changes only fields, a part
    entry only parts: the two kinds commute, so folding the envelopes early reads the same.

    The envelopes are the turn's own fields, under Limits.stream_bytes counted apart (budget): an
    envelope that changes what the last one said counts its chunk's bytes (spent), and past the
    budget none is taken (full). Counted as they are folded, where both twins read the same values
    (the compiled twin logs an envelope whose text changed, its spacing alone perhaps): so when is
    no matter, and the limit is reported at the stream's end (settle).

    The part entries but OTHER (whose caller counts the part) are the turn's own fields too, under
    Limits.stream_bytes (Sink.keep_own: the chunk's bytes, once); cut: whether one did not fit
    (refuse: from then on none is logged but a bare call and gaps).
    """

    __slots__ = ("log", "envelope", "folded", "pending", "pending_bytes", "open_run", "clean", "budget", "spent",
                 "full", "last", "last_value", "cut", "gapped")

    def __init__(self, budget: int = UNLIMITED) -> None:
        self.log: list[tuple] = []
        self.envelope: Any = None
        self.folded: tuple[dict[str, Any], dict[int, GeminiCandidate]] | None = None
        self.pending = 0
        self.pending_bytes = 0
        self.open_run: tuple[int, Any, int] = _NO_RUN
        self.clean = 0
        self.budget = budget
        self.spent = 0
        self.full = False
        self.last: Any = None  # the _key of the last envelope folded
        self.last_value: Any = None  # and that envelope
        self.cut = False
        self.gapped: set = set()  # the choices whose latest part entry is a gap (gap logs one once)

    def event(self, acc: Any, kind: int, choice: int, a: Any = None, b: Any = None) -> None:
        """Log a part's event, with where the choice's texts end before it, within the turn's budget."""
        if kind == RUN and b is None and self.open_run == (choice, a, len(self.log)):
            return
        if kind == CALL and not acc.calls_left():
            self.gap(acc, choice)  # a call Limits.calls drops: the run before it ends there, as it would
            return
        if _counted(kind, a, b) and (self.cut or not acc.keep_own((a, b))):
            self.refuse(acc, kind, choice)
            return
        self._log(acc, kind, choice, a, b)

    def refuse(self, acc: Any, kind: int, choice: int) -> None:
        """Keep what the turn may of a part's event past its budget: a call bare (it is in the result), no other.

        A refusal ends the choice's open run there (a gap, once: gapped): a new run, a signature, a
        call's extras are entries more, and the text that follows is in no part, so the parts
        listed are the first ones, as they came.
        """
        self.cut = True
        if kind == CALL:
            self._log(acc, CALL, choice, None, None)
        else:
            self.gap(acc, choice)

    def _log(self, acc: Any, kind: int, choice: int, a: Any, b: Any) -> None:
        self.log.append((kind, choice, acc.text_length(choice, 0), acc.text_length(choice, 1), a, b))
        self.open_run = (choice, a, len(self.log)) if kind == RUN and b is None else _NO_RUN
        if kind == OTHER and a is None:
            self.gapped.add(choice)
        elif self.gapped:
            self.gapped.discard(choice)

    def gap(self, acc: Any, choice: int) -> None:
        """Log where a part the turn does not keep (past its budget) stood: the text run before it ends there.

        Logged as an OTHER entry with no part, once for parts of a choice not kept in a row (gapped):
        the part's text, if any, is then in no part (the text goes on in the choice's), and the text
        after it in a run of its own, as when the part is kept; never joined to the run before it.
        """
        if choice not in self.gapped:
            self.event(acc, OTHER, choice, None)

    def take_envelope(self, obj: dict, admitted: list[bool], size: int) -> None:
        """Log a chunk's envelope (all but its parts and usageMetadata) unless it is the last one logged.

        admitted: per candidate, whether it is kept (Limits.choices); one that is not is logged as
        null, which keeps the places of the others (a candidate without an index is numbered by its place).
        size: the chunk's bytes (-1 for a chunk fed as an object: the envelope's JSON is measured).
        """
        envelope = _envelope_of(obj, admitted)
        try:
            changed = envelope != self.envelope
        except RecursionError:  # nested near orjson's 1,024 levels, under a deep stack: a repeat logged is harmless
            changed = True
        if changed:
            self.log_envelope(envelope, size if size >= 0 else json_size(envelope))

    def log_envelope(self, envelope: Any, size: int) -> None:
        """Log a changed envelope (a dict, or the compiled twin's text) of a chunk of size bytes; fold them now and then.

        Once the budget is spent, none is logged: none would be taken.
        """
        self.envelope = envelope
        if self.full:
            return
        log = self.log
        choice, kind, at = self.open_run
        run_open = at == len(log)
        log.append((ENVELOPE, None, size, 0, envelope, None))
        self.pending += 1
        self.pending_bytes += size
        if self.pending >= FOLD_AT or self.pending_bytes >= FOLD_BYTES:
            self.fold()
        # An envelope changes no part: an open run stays open. A note of a run no longer open is
        # dropped, so that a log shrunk by the fold cannot happen to match its length again.
        if run_open:
            self.open_run = (choice, kind, len(log))
        elif at >= 0:
            self.open_run = _NO_RUN

    def fold(self) -> None:
        """Take the envelopes out of the log into folded, in order; the log keeps its part entries."""
        fields, candidates = self.folded if self.folded is not None else ({}, {})
        log = self.log
        # Only what came after the last fold: the part entries before it stay where they are, and
        # reading them again at every fold made a stream of parts and changing envelopes quadratic.
        kept = []
        budget = [self.spent, self.full, self.last, self.last_value]
        for entry in log[self.clean:]:
            if entry[0] == ENVELOPE:
                _take_counted(fields, candidates, entry, self.budget, budget)
            else:
                kept.append(entry)
        log[self.clean:] = kept  # in place: the compiled twin holds the list
        self.clean = len(log)
        self.folded = (fields, candidates)
        self.spent, self.full, self.last, self.last_value = budget
        self.pending = self.pending_bytes = 0

    def settle(self) -> bool:
        """Fold what may go past the budget, at the stream's end; tell whether the envelopes went past it."""
        if not self.full and self.spent + self.pending_bytes > self.budget:
            self.fold()
        return self.full


def _take_counted(fields: dict, candidates: dict, entry: tuple, limit: int, budget: list) -> None:
    """Take a logged envelope's fields if it changes what the last one taken said and its chunk fits the budget.

    budget: [bytes spent, whether the budget is spent, the _key of the last envelope taken, that envelope],
    updated.
    Compared by _key, which never recurses: == does, and a deep envelope could then be equal in one
    twin and refused (RecursionError) in the other, whose stack is deeper.
    """
    if budget[1]:
        return
    envelope = entry[4] if type(entry[4]) is dict else _envelope_of(loads_exact(entry[4]))
    key = _key(envelope)
    if key is not None and key == budget[2]:
        return  # the compiled twin logs a change of text that is none of value (its spacing, say)
    if budget[0] + entry[2] > limit:
        budget[1] = True
        return
    budget[0] += entry[2]
    budget[2], budget[3] = key, envelope
    _take_envelope(fields, candidates, envelope)


def choice_of(candidate: dict, position: int) -> int:
    """Return a candidate's choice number: its index, or its place in the list when it has none that is an integer."""
    choice = candidate.get("index", position)
    return choice if type(choice) is int else position


def _envelope_of(obj: dict, admitted: list[bool] | None = None) -> dict:
    """Return a chunk's envelope: its fields but usageMetadata, and its candidates' but their parts.

    admitted: per candidate, whether it is kept (Limits.choices); one that is not is None. None:
    all are (the compiled twin's text, of a chunk its fast path took: parts and usage null, read
    here into what the general path logs, so that the two compare equal when they say the same).
    """
    envelope = {key: value for key, value in obj.items() if key != "usageMetadata"}
    listed = obj.get("candidates")
    if type(listed) is list:
        kept = admitted if admitted is not None else [True] * len(listed)
        envelope["candidates"] = [_without_parts(candidate) if keep else None for candidate, keep in zip(listed, kept)]
    return envelope


def _without_parts(candidate: Any) -> Any:
    content = candidate.get("content") if type(candidate) is dict else None
    if type(content) is not dict or "parts" not in content:
        return candidate
    return {**candidate, "content": {key: value for key, value in content.items() if key != "parts"}}


class GeminiCandidate:
    """One candidate, read from the log: its fields but content, its content's fields but parts, its parts.

    parts holds entries: ``[RUN, which, start, end, signature]`` (a slice of the choice's text
    ``which``: 0 content, 1 thoughts; end None: to the end of that text), ``[CALL, ordinal,
    signature, extras]`` (the ordinal-th call of the choice), ``[OTHER, part]``.
    """

    __slots__ = ("fields", "content", "parts", "run", "calls", "last_call", "cited")

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.content: dict[str, Any] = {}
        self.parts: list[list] = []
        self.run: list | None = None
        self.calls = 0
        # Where in parts the last CALL entry is (-1: none): a later signature goes there, found
        # without walking back over the parts since (one signature per chunk made that quadratic).
        self.last_call = -1
        # The citation lists this record merged into, by key: its own copies, and what they hold.
        self.cited: dict[str, _Seen] = {}

    def copy(self) -> GeminiCandidate:
        """Return a record of the same fields and no parts, for a read to add to (lists are copied as they grow)."""
        out = GeminiCandidate()
        out.fields, out.content = dict(self.fields), dict(self.content)
        return out

    def take(self, candidate: dict) -> None:
        """Record a candidate chunk's fields but its parts."""
        for key, value in candidate.items():
            if value is None:
                continue
            if key == "content":
                if type(value) is dict:
                    for name, item in value.items():
                        if name != "parts" and item is not None:
                            self.content[name] = item
            elif key == "citationMetadata" and type(value) is dict and key in self.fields:
                self._more_citations(value)
            else:
                self.fields[key] = value

    def _more_citations(self, new: dict) -> None:
        """Add the citations of a later citationMetadata to those kept, each once; its other fields replace theirs.

        The lists grow in place, and each citation is looked for by its key (_key), never compared to
        the others: a stream of n chunks that each cite costs n, not n squared. The log's own objects stay as read.
        """
        kept = self.fields["citationMetadata"]
        if type(kept) is not dict:
            self.fields["citationMetadata"] = new
            self.cited = {}
            return
        if not self.cited:
            kept = self.fields["citationMetadata"] = dict(kept)  # this record's own, from now on
        for key, value in new.items():
            old = kept.get(key)
            if key in _CITATION_LISTS and type(old) is list and type(value) is list:
                seen = self.cited.get(key)
                if seen is None:
                    old = kept[key] = list(old)
                    seen = self.cited[key] = _Seen(old)
                added = [item for item in value if item not in seen]  # (repeats within one chunk stay, as sent)
                old.extend(added)
                seen.update(added)
            else:
                kept[key] = value
                self.cited.pop(key, None)  # a list taken as sent is copied before it grows

    def close_run(self, lengths: tuple) -> None:
        """End the open text run where the choice's text of its kind ended (lengths: content, thought)."""
        if self.run is not None:
            self.run[3] = lengths[self.run[1]]
            self.run = None

    def text(self, which: int, lengths: tuple, signature: Any) -> None:
        """A text part: go on with the open run of its kind (unless signed already), or start one."""
        run = self.run
        if run is None or run[1] != which or run[4] is not None:
            self.close_run(lengths)
            run = self.run = [RUN, which, lengths[which], None, None]
            self.parts.append(run)
        if signature is not None:
            run[4] = signature


def read(turn: GeminiTurn | None) -> tuple[dict[str, Any], dict[int, GeminiCandidate]]:
    """Return the top-level fields and the candidates the log of a turn says."""
    fields: dict[str, Any] = {}
    candidates: dict[int, GeminiCandidate] = {}
    if turn is not None and turn.folded is not None:
        fields = dict(turn.folded[0])
        candidates = {choice: record.copy() for choice, record in turn.folded[1].items()}
    # Counted only where the budget may run out (settle folded those); else compared with the last one
    # taken by == (cheaper than _key; the flat key when == goes past the recursion limit, as a fold
    # compares). An envelope the compiled twin logged for a change of text alone (its spacing, 1.0
    # for 1) is not taken: the fields keep the first way it was written, as the pure twin's do.
    budget = None
    last = None
    if turn is not None:
        last = turn.last_value
        if turn.full or turn.spent + turn.pending_bytes > turn.budget:
            budget = [turn.spent, turn.full, turn.last, turn.last_value]
    for entry in turn.log if turn is not None else ():
        kind, choice, length0, length1, a, b = entry
        if kind == ENVELOPE:
            if budget is None:
                value = a if type(a) is dict else _envelope_of(loads_exact(a))
                try:
                    same = value == last
                except RecursionError:  # (nested deep, or called from deep: the flat key tells, as a fold's)
                    key = _key(value)
                    same = key is not None and key == _key(last)
                if not same:
                    _take_envelope(fields, candidates, value)
                    last = value
            else:
                _take_counted(fields, candidates, entry, turn.budget, budget)  # type: ignore[union-attr]
            continue
        record = candidates.get(choice)
        if record is None:
            record = candidates[choice] = GeminiCandidate()
        if kind == RUN:
            record.text(a, (length0, length1), b)
        elif kind == CALL_SIGNATURE:
            if record.last_call >= 0 and record.parts[record.last_call][2] is None:
                record.parts[record.last_call][2] = a
        else:
            record.close_run((length0, length1))
            if kind == CALL:
                record.last_call = len(record.parts)
                record.parts.append([CALL, record.calls, a, b])
                record.calls += 1
            elif a is not None:
                record.parts.append([OTHER, a])
            else:  # a part not kept (past the budget) or a call Limits.calls dropped: GeminiTurn.gap
                record.last_call = -1  # (a signature after it is not the last kept call's)
    return fields, candidates


def _take_envelope(fields: dict, candidates: dict, obj: dict) -> None:
    """Take a chunk's fields but its parts: the top level's and each candidate's (its content's role …)."""
    for key, value in obj.items():
        if value is not None and key not in _SKIPPED_TOP:
            fields[key] = value
    listed = obj.get("candidates")
    for position, candidate in enumerate(listed if type(listed) is list else ()):
        if type(candidate) is not dict:
            continue
        choice = choice_of(candidate, position)
        record = candidates.get(choice)
        if record is None:
            record = candidates[choice] = GeminiCandidate()
        record.take(candidate)


class _Seen:
    """The JSON values of a list, for telling whether a value equal to one is in it without comparing it to all."""

    __slots__ = ("keys", "loose")

    def __init__(self, items: list) -> None:
        self.keys: set[tuple] = set()  # by _key: values equal to each other (==) have one key, others not
        self.loose: list = []  # values with no key (no JSON value: keys that do not sort, an unhashable leaf)
        self.update(items)

    def update(self, items: list) -> None:
        for item in items:
            key = _key(item)
            if key is None:
                self.loose.append(item)
            else:
                self.keys.add(key)

    def __contains__(self, item: Any) -> bool:
        key = _key(item)
        return item in self.loose if key is None else key in self.keys


# The marks a key writes for a container's start and end: no value read from JSON is equal to one.
_DICT, _LIST, _END = object(), object(), object()


def _key(value: Any) -> tuple | None:
    """Return a flat hashable form of a JSON value that exactly the values equal to it (==) share; None when none.

    The value written out token by token (a mark for each dict and list and its end, a dict's keys
    sorted, as == ignores their order; the scalars as they are, so 1, 1.0 and True are one, as ==
    has them) by a loop, not recursion, into one flat tuple: a value nested past any depth (orjson
    reads 1,024 levels) costs its size, never a RecursionError, and no set lookup recurses (a nested
    tuple's hash would, in C). Values that only a bounded-depth form could tell apart were compared
    one by one: a stream of deep citations was quadratic.
    """
    out: list = []
    todo = [value]  # what is left to write, the next last
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is dict:
            try:
                names = sorted(item)
            except TypeError:  # keys of several types
                return None
            out.append(_DICT)
            todo.append(_END)
            for name in reversed(names):
                todo.append(item[name])
                todo.append(name)  # (a key is a scalar: written as one)
        elif kind is list:
            out.append(_LIST)
            todo.append(_END)
            todo.extend(reversed(item))
        else:
            out.append(item)
    key = tuple(out)
    try:
        hash(key)
    except TypeError:  # an unhashable scalar
        return None
    return key


# ---------------------------------------------------------------- building the objects

def response(result: Any, turn: GeminiTurn | None) -> dict[str, Any]:
    """Return the GenerateContentResponse the API would have sent without streaming."""
    fields, records = read(turn)
    out: dict[str, Any] = {}
    candidates = [_candidate(result, index, record) for index, record in sorted(records.items())]
    if candidates:
        out["candidates"] = candidates
    out.update(fields)
    if result.usage is not None:
        out["usageMetadata"] = result.usage
    return fresh(out)


def message(result: Any, turn: GeminiTurn | None, choice: int) -> dict[str, Any]:
    """Return the model's Content for the next request's contents: role and parts, signatures on their parts."""
    record = read(turn)[1].get(choice)
    if record is None:
        if choice != 0:
            raise IndexError(f"the stream has no candidate {choice}")
        return {"role": "model", "parts": []}
    role = record.content.get("role")
    return fresh({"role": role if type(role) is str else "model", "parts": _parts(result, choice, record)})


def _candidate(result: Any, index: int, record: GeminiCandidate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    parts = _parts(result, index, record)
    if parts or record.content:
        out["content"] = {"parts": parts, **record.content}
        out["content"].setdefault("role", "model")
    out.update(record.fields)
    return out


def _parts(result: Any, choice: int, record: GeminiCandidate) -> list[dict[str, Any]]:
    calls = [call for call in result.tool_calls if call.choice == choice]
    texts = _texts(result, choice)
    parts: list[dict[str, Any]] = []
    for entry in record.parts:
        kind = entry[0]
        if kind == RUN:
            _, which, start, end, signature = entry
            data = texts[which]
            text = data[start:len(data) if end is None else end].decode("utf-8", "replace")
            if not text and signature is None:
                continue
            part: dict[str, Any] = {"text": text}
            if which:
                part["thought"] = True
            if signature is not None:
                part["thoughtSignature"] = signature
        elif kind == CALL:
            _, ordinal, signature, extras = entry
            if ordinal >= len(calls):
                continue  # dropped at a limit (result.errors says so): no call to show
            part = _call_part(calls[ordinal], signature, extras)
        else:
            part = dict(entry[1])
        parts.append(part)
    return parts


def _call_part(call: Any, signature: Any, extras: Any) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if call.id is not None:
        function["id"] = call.id
    function["name"] = call.name
    if call.arguments is not None:
        function["args"] = call.arguments  # absent when the arguments were cut or broken: none invented
    part_extras, call_extras = extras if extras is not None else (None, None)
    if call_extras:
        function.update(call_extras)
    part: dict[str, Any] = {"functionCall": function}
    if part_extras:
        part.update(part_extras)
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _texts(result: Any, choice: int) -> tuple[bytes, bytes]:
    for item in result.choices:
        if item.index == choice:
            return ((item.text or "").encode("utf-8", "surrogatepass"),
                    (item.reasoning or "").encode("utf-8", "surrogatepass"))
    return b"", b""
