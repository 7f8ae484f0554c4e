"""One-shot helpers built on an Accumulator class."""

from __future__ import annotations

from typing import Any, Callable

from ._accumulator import Accumulator
from ._limits import Limits
from ._results import Result


def _reassemble_with(accumulator_class: Any, body: bytes | bytearray | memoryview | str, format: str,
                     strict: bool, limits: Limits | None) -> Result:
    acc = accumulator_class(format, limits)
    acc.feed(body)
    return acc.finalize(strict=strict)  # type: ignore[no-any-return]


def reassemble(body: bytes | bytearray | memoryview | str, format: str = "auto", *, strict: bool = False,
               limits: Limits | None = None) -> Result:
    """Reassemble the tool calls of one whole streamed response body.

    ``format`` names the wire format, or "auto" (the default) detects it; ``strict=True``
    raises the first error instead of reporting it; ``limits`` bound what the stream may hold.
    """
    acc = Accumulator(format, limits)  # positional: a keyword call builds a dict; not through _reassemble_with: a call less
    acc.feed(body)
    return acc.finalize(strict=strict)  # type: ignore[no-any-return]


def make_reassemble(accumulator_class: type) -> Callable[..., Result]:
    """Return reassemble() bound to accumulator_class instead (the tests bind each twin with it)."""

    def bound(body: bytes | bytearray | memoryview | str, format: str = "auto", *, strict: bool = False,
              limits: Limits | None = None) -> Result:
        return _reassemble_with(accumulator_class, body, format, strict, limits)

    bound.__doc__ = reassemble.__doc__
    return bound
