"""One-shot helpers built on an Accumulator class."""

from __future__ import annotations

from typing import Callable

from ._limits import Limits
from ._results import Result


def make_reassemble(accumulator_class: type) -> Callable[..., Result]:
    """Return a reassemble() function that uses accumulator_class."""

    def reassemble(body: bytes | bytearray | memoryview | str, format: str = "openai-chat", *,
                   strict: bool = False, limits: Limits | None = None) -> Result:
        """Reassemble the tool calls of one whole streamed response body."""
        acc = accumulator_class(format=format, limits=limits)
        acc.feed(body)
        return acc.finalize(strict=strict)

    return reassemble
