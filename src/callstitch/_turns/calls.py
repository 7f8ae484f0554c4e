"""The client calls of choice 0, handed to the blocks that name them by id, first come first served."""

from __future__ import annotations

from collections import deque
from typing import Any


class CallsById:
    """The calls of choice 0 not yet given to a block, by id: a lookup each, not a walk of all of them.

    A stream of thousands of blocks whose ids match no call (ids that are no strings, calls a
    limit refused) walked every call for every block: n squared.
    """

    def __init__(self, result: Any) -> None:
        self.free: dict[Any, deque] = {}
        for call in result.tool_calls:
            if call.choice == 0:
                self.free.setdefault(call.id, deque()).append(call)

    def take(self, call_id: Any) -> Any:
        """Return the first call not yet taken whose id is call_id, and take it; None when there is none."""
        try:
            waiting = self.free.get(call_id)
        except TypeError:  # an id that is no key (a list, an object): no call has it
            return None
        return waiting.popleft() if waiting else None
