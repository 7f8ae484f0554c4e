"""The accumulator as the format adapters and framers see it: the methods they call, typed, documented once.

Both twins implement these: tests/test_parity.py checks their signatures, tests/test_typed_package.py
that a type checker takes either twin for each protocol, and each adapter against them. They are
in-package names, not public API: a user feeds bytes and chunks, never fragments.
"""

from __future__ import annotations

from typing import Any, Protocol

# The texts of a choice, as text_piece's which: message content, reasoning, refusal.
TEXT_CONTENT, TEXT_REASONING, TEXT_REFUSAL = 0, 1, 2


class Sink(Protocol):
    """What a format adapter hands its calls and texts to."""

    def fragment(self, choice: int, index: int | None, call_id: Any, name: str | None, arguments: Any) -> None:
        """Route one piece of a function call to its slot (the quirk rules apply) and append its arguments.

        index: the call's index within the choice, or None when the provider sent none; call_id and
        name: None when this piece does not carry them; arguments: text, or an object that is the
        whole arguments value so far (cumulative providers).
        """

    def custom_fragment(self, choice: int, index: int | None, call_id: Any, name: str | None, text: Any) -> None:
        """Route one piece of a custom (free-form) tool call; its input text is appended as sent."""

    def identify(self, choice: int, index: int, call_id: str | None, name: str | None) -> None:
        """Give the known call at (choice, index) the id and name it still lacks; a repeat is no quirk."""

    def whole(self, choice: int, call_id: Any, name: str | None, arguments: Any, room: int = -1) -> None:
        """Take a call that arrived whole (Ollama, Gemini), a call of its own, and hand it over.

        arguments: text, or a JSON value already parsed, kept instead of parsing it again. room: the
        bytes (argument_room()) an adapter that built the call held it to, when the call went past
        them there (its text a prefix that does not parse): it is handed over cut at that limit.
        """

    def text_piece(self, choice: int, which: int, text: str) -> None:
        """Append message text of a choice; which: TEXT_CONTENT, TEXT_REASONING or TEXT_REFUSAL."""

    def text_length(self, choice: int, which: int) -> int:
        """Return how many bytes of a choice's text are kept so far: where its next piece will start.

        A turn record notes it where a content block starts and ends, so that a block's text is a
        slice of the choice's text, not a second copy (a limit's cut shortens the slice).
        """

    def admit_choice(self, choice: int) -> bool:
        """Tell whether a choice may be kept (a new one counts against Limits.choices); the Result lists each one kept.

        Text, calls and a finish reason admit their choice themselves: an adapter asks for a choice
        that said something else (only its role, fields its turn record keeps) and keeps nothing
        of one refused.
        """

    def calls_left(self) -> bool:
        """Tell whether a call may still start: Limits.calls is not reached (a turn notes no call the limit drops)."""

    def call_at(self, choice: int, index: int | None) -> tuple[Any, int] | None:
        """Return the id (or None) and the position in its choice of the call a piece just went to; None if none.

        index: the piece's protocol index, or None for a piece without one. A turn keys what it keeps
        of a call by these, whatever index the provider counts from.
        """

    def spend(self, size: int) -> bool:
        """Count size bytes the turn keeps of its own (a server tool's input) against Limits.stream_bytes; False: over.

        Over the limit, the limit is reported once and the caller keeps nothing more of that field.
        """

    def keep_own(self, kept: Any) -> bool:
        """Tell whether the turn may keep kept, a field of its own of the event being handled (Limits.stream_bytes).

        Its own: not a call, a text or a server tool's input (spend), but logprobs, citations, tool
        results, fields callstitch does not read. The event's size is counted once, by its first
        field asked; past the budget the turn keeps none of its own fields from then on.
        """

    def own_budget(self) -> int:
        """Return the bytes the turn's own fields may take (Limits.stream_bytes, counted apart), for one counted later.

        An adapter that counts them itself, not as each event comes (Gemini's envelopes, counted
        as they are folded), reports going past it with _limits.own_full.
        """

    def argument_room(self) -> int:
        """Return the most argument bytes a call started now may keep: Limits.call_bytes, or stream_bytes' rest.

        An adapter that holds a call's arguments itself until the call closes (Vertex AI's
        partialArgs) holds no more than this: a call longer than it is cut when handed over.
        """

    def choice_finished(self, choice: int, reason: Any) -> None:
        """Record a choice's finish reason (none for a choice past Limits.choices): the stream ended as it should.

        Calls are not handed over by it: a format whose finish reason closes its calls says so with complete().
        """

    def complete(self, choice: int | None, index: int | None) -> None:
        """Hand over the calls the protocol just closed: one (choice, index), a whole choice (index None), or all."""

    def no_event(self) -> None:
        """Say that what follows comes with no event of the stream (its end): a limit it reaches has no offset."""

    def cut_open(self, cause: int = ...) -> None:
        """Cut every call still open and every text, after losing an event: too big (the default) or unreadable.

        cause: a _limits.CUT_* code, CUT_EVENT_BYTES or CUT_UNREADABLE. The lost event may have
        held a piece of any of them: each call not yet handed over reads as truncated and keeps
        nothing more, one handed over broken is cut, one handed over whole is cut too if a piece of
        it comes after all, and no text keeps anything more (cut, never holed).
        """


class EventSink(Sink, Protocol):
    """What a framer other than the twin's own SSE framing (NDJSON, AWS event stream, JSON array) hands events to.

    A Sink too: a framing that ends the stream itself (a JSON array's closing "]") completes the calls.
    """

    def event(self, event: str | None, data: bytes, offset: int) -> None:
        """Handle one framed event: its name (SSE event, event-stream type) or None, its payload, its byte offset."""


class Halting(Protocol):
    """What the batch layer asks of an accumulator that reads one stream out of back-to-back ones."""

    def halt_at_end(self) -> None:
        """Stop consuming right after the stream's terminator; halted() then says where it was.

        Asked after the terminator has come, it halts at once: halted() is 0, as no byte fed
        from then on is this stream's.
        """

    def halted(self) -> int:
        """Return how many bytes of the last fed data belonged to this stream, once it ended; else -1."""
