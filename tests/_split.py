"""Read data through a batch splitter as the batch reads it, for the splitter tests."""

from __future__ import annotations

from callstitch._batch.split import Splitter


def read_in_blocks(splitter: Splitter, data: bytes, block: int) -> tuple[list[int], int]:
    """Return the cuts a splitter finds in data read block by block, and the most it kept back.

    Each read is a block, or as long as what was kept back (as the batch reads); what the
    splitter keeps back is scanned again in front of the next read.
    """
    cuts, base, tail, at, held = [], 0, b"", 0, 0
    while True:
        piece, at = data[at:at + max(block, len(tail))], at + max(block, len(tail))
        buf = tail + piece
        found, safe = splitter.scan(buf, 0, not piece)
        cuts += [base + c for c in found]
        if not piece:
            return [c for c in cuts if c < len(data)], held
        tail, base = buf[safe:], base + safe
        held = max(held, len(tail))
