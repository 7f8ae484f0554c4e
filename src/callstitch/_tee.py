"""Pass a stream through untouched while reassembling its tool calls on the side (gateways)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from types import FunctionType
from typing import Any, AsyncIterable, AsyncIterator, Callable, Iterable, Iterator

from ._accumulator import Accumulator
from ._limits import Limits
from ._results import Result, ToolCall

OnCall = Callable[[ToolCall], Any]


class _Tap:
    """What tee and atee share: the chunks, the accumulator, the callback, the result."""

    # One is made per stream a gateway passes on: slots and one __init__ keep that cheap.
    __slots__ = ("_chunks", "_acc", "_on_call", "_result", "_handed", "_settled")

    def __init__(self, chunks: Any, format: str = "auto", on_call: OnCall | None = None, accumulator: Any = None,
                 limits: Limits | None = None) -> None:
        self._chunks = chunks
        self._acc = accumulator if accumulator is not None else Accumulator(format=format, limits=limits)
        self._on_call = on_call
        self._result: Result | None = None
        # (choice, index) of the calls on_call has had; made with the first one. Not id(call): a
        # call that gets a piece after its hand-over is rebuilt as a new object at the end, and
        # the id of one that nobody kept may come back as another call's.
        self._handed: set[tuple[int, int]] | None = None
        self._settled = False  # the calls left at the end have been handed over

    def _due(self, calls: list[ToolCall]) -> Iterator[ToolCall]:
        """Yield the calls on_call has not had yet, each marked as had before it goes (an on_call may read .result)."""
        handed = self._handed
        if handed is None:
            handed = self._handed = set()
        for call in calls:
            key = (call.choice, call.index)
            if key not in handed:
                handed.add(key)
                yield call

    def _hand(self, calls: list[ToolCall]) -> None:
        """Give on_call the calls one chunk completed."""
        if not calls:
            return
        for call in self._due(calls):
            value = self._on_call(call)  # type: ignore[misc]
            if value is not None:  # (most on_calls return None: no isawaitable() for them)
                _refuse_awaitable(value)

    def _left(self) -> list[ToolCall]:
        """Finish the stream; return, once, its calls: the hand-over gives on_call those it has not had (_due)."""
        if self._result is None:
            self._result = self._acc.finalize()
        if self._on_call is None or self._settled:
            return []
        self._settled = True
        # Calls the protocol never closed (the stream ended, or the client left) are handed over
        # now, so every call reaches on_call once.
        return self._result.tool_calls

    def _finish(self) -> None:
        self._hand(self._left())

    @property
    def result(self) -> Result:
        """Return the Result of what has passed so far (the stream is finished on first access)."""
        if self._result is None:  # (once it is set, _left has handed over every call: nothing to do)
            self._finish()
            assert self._result is not None
        return self._result


def _is_async(fn: Any) -> bool:
    """Tell whether calling fn returns a coroutine: an async def function, or an object whose __call__ is one."""
    if type(fn) is FunctionType:  # the common on_call: a function's own __call__ is never async (one look, not two)
        return inspect.iscoroutinefunction(fn)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _refuse_awaitable(value: Any) -> None:
    """Raise TypeError when a sync tee's on_call turned out to be async (its coroutine is closed, never run)."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()  # no "never awaited" warning: the error says it instead
        raise TypeError("tee()'s on_call returned an awaitable: use atee() for an async on_call")


class Tee(_Tap):
    """An iterable that yields a stream's chunks unchanged while feeding an accumulator."""

    __slots__ = ()

    def __iter__(self) -> Iterator[bytes]:
        feed, hand = self._acc.feed, self._on_call is not None  # looked up once: this runs per chunk
        try:
            for chunk in self._chunks:
                # Once .result was read the stream is finished: later chunks pass through unfed.
                calls = feed(chunk) if self._result is None else None
                if calls and hand:
                    self._hand(calls)
                yield chunk
        finally:  # also when the consumer stops early (a client that disconnects)
            try:
                close = getattr(self._chunks, "close", None)
                if close is not None:
                    close()  # a consumer that stopped early stops the source too
            finally:  # a source that fails to close still leaves calls on_call is due
                self._finish()


class ATee(_Tap):
    """An async iterable that yields a stream's chunks unchanged while feeding an accumulator."""

    __slots__ = ()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        feed, hand = self._acc.feed, self._on_call is not None  # looked up once: this runs per chunk
        try:
            async for chunk in self._chunks:
                calls = feed(chunk) if self._result is None else None
                if calls and hand:
                    await self._ahand(calls)
                yield chunk
        finally:
            try:
                close = getattr(self._chunks, "aclose", None)
                if close is not None:
                    await close()  # a consumer that stopped early stops the source too
            finally:  # also when closing fails, or is cancelled: .result never hands calls over
                await self._ahand(self._left())

    async def _ahand(self, calls: list[ToolCall]) -> None:
        """Give on_call the calls, awaiting it when it is async: once begun on a call, to its end.

        A cancellation that comes meanwhile (the client left, a timeout) is raised once every call
        in flight has had its on_call: they are marked as had before it runs (_due), so one left
        out then would never reach it.
        """
        cancelled: BaseException | None = None
        for call in self._due(calls):
            value = self._on_call(call)  # type: ignore[misc]
            if inspect.isawaitable(value):
                with _shielded():
                    cancelled = await _to_its_end(value) or cancelled
        if cancelled is not None:
            raise cancelled

    def _finish(self) -> None:
        # .result read before the iteration ended: the calls still due are handed (and awaited)
        # when it ends, in the iteration, the only place an async on_call can run.
        if self._result is None:
            self._result = self._acc.finalize()

    @property
    def result(self) -> Result:
        """Return the Result of what has passed so far (calls still due reach on_call when the iteration ends)."""
        self._finish()
        assert self._result is not None
        return self._result


async def _to_its_end(awaitable: Any) -> BaseException | None:
    """Await an async on_call to its end, through asyncio's own cancellation too; return that cancellation, if one came.

    anyio's shield (_shielded) holds off a cancel scope's cancellation, not asyncio's Task.cancel()
    (asyncio.timeout and wait_for, aiohttp when a client leaves, a server's shutdown): under
    asyncio the on_call runs as a task of its own, awaited again after each cancellation of ours
    until it ends, and the cancellation is handed back to be raised when the calls are all had.
    """
    asyncio = sys.modules.get("asyncio")  # (not imported: no asyncio loop runs, and importing it costs)
    try:
        asyncio.get_running_loop()  # type: ignore[union-attr]
    except (AttributeError, RuntimeError):  # another event loop (trio): anyio's shield is what holds
        await awaitable
        return None
    task = asyncio.ensure_future(awaitable)  # type: ignore[union-attr]
    cancelled = None
    while not task.done():
        try:
            await asyncio.shield(task)  # type: ignore[union-attr]
        except asyncio.CancelledError as exc:  # type: ignore[union-attr]
            cancelled = exc  # ours, or (the task done) the on_call's own: task.result() below tells
    task.result()  # what awaiting the on_call gives: its exception, or its own cancellation, raised
    return cancelled


def _shielded() -> Any:
    """Return a context that a cancellation under way does not reach into (anyio's; where none can be, a no-op).

    Starlette (and every anyio user) stops a response whose client left with a cancel scope, which
    cancels each await after it too: an async on_call would be stopped mid-call, and the calls in
    flight lost. Only where anyio is imported can such a scope be in force, so no dependency on it.
    """
    anyio = sys.modules.get("anyio")
    if anyio is not None:
        try:
            return anyio.CancelScope(shield=True)
        except Exception:  # (an event loop anyio does not know: no scope of its can be in force)
            pass
    return contextlib.nullcontext()


def tee(chunks: Iterable[bytes], format: str = "auto", on_call: OnCall | None = None, *,
        limits: Limits | None = None) -> Tee:
    """Yield every chunk unchanged, in order, while reassembling the calls; ``.result`` holds the Result.

    ``on_call(call)`` runs for each call as soon as the protocol says it is complete (a block
    stop, a done event, a finish reason, the terminator), with parsed arguments, once per call.
    Calls the protocol never closed (the stream ended early, or the consumer stopped) are handed
    over when the stream ends, with an error when their arguments were cut short. An async
    ``on_call`` is refused here with a TypeError: atee() awaits it.
    """
    if on_call is not None and _is_async(on_call):
        raise TypeError("tee()'s on_call is a coroutine function, which tee() cannot await: use atee()")
    return Tee(chunks, format, on_call, limits=limits)


def atee(chunks: AsyncIterable[bytes], format: str = "auto", on_call: OnCall | None = None, *,
         limits: Limits | None = None) -> ATee:
    """Do what tee() does, for an async iterable of chunks; ``on_call`` may be async (it is awaited).

    With atee, on_call runs inside the iteration: calls still due when ``.result`` is read
    before the iteration ended reach it when the iteration ends.
    """
    return ATee(chunks, format, on_call, limits=limits)
