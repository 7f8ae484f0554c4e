"""The AWS event stream, framed in place by the compiled twin: the twins agree on sound and damaged streams."""

import random
import struct

import pytest

from _formats import CALLS, bedrock_body, es_event, es_exception, eventstream_message
from conftest import agree

from callstitch import Limits, _accumulator_c

SOUND = bedrock_body(CALLS)


def test_crc32_is_zlibs():
    import zlib
    rng = random.Random(5)
    for n in (0, 1, 7, 8, 9, 15, 16, 17, 255, 4096):
        data = bytes(rng.getrandbits(8) for _ in range(n))
        assert _accumulator_c._crc32(data) == zlib.crc32(data)


@pytest.mark.parametrize("fmt", ["bedrock", "auto"])
def test_sound_stream(both, fmt):
    result = agree(both, SOUND, fmt)
    assert result.format == "bedrock" and not result.errors
    assert [c.name for c in result.tool_calls] == [c.name for c in CALLS]


def flip(data, pos):
    return data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1:]


def message_starts(body):
    starts, pos = [], 0
    while pos < len(body):
        starts.append(pos)
        pos += struct.unpack_from(">I", body, pos)[0]
    return starts


@pytest.mark.parametrize("where", ["prelude length", "prelude crc", "headers", "payload", "message crc"])
def test_damage_in_each_part_of_a_message(both, where):
    starts = message_starts(SOUND)
    at = starts[len(starts) // 2]
    headers_len = struct.unpack_from(">I", SOUND, at + 4)[0]
    total = struct.unpack_from(">I", SOUND, at)[0]
    pos = {"prelude length": at + 1, "prelude crc": at + 9, "headers": at + 13,
           "payload": at + 12 + headers_len + 2, "message crc": at + total - 2}[where]
    result = agree(both, flip(SOUND, pos), "bedrock")
    assert result.errors and all(e.kind == "malformed chunk" for e in result.errors)


def test_exceptions_odd_headers_and_garbage(both):
    odd_headers = eventstream_message({":message-type": "event", ":event-type": "contentBlockDelta"}, b"{}")
    unreadable = bytearray(eventstream_message({":event-type": "x"}, b"{}"))
    unreadable[12 + 1 + len(":event-type")] = 99  # an unknown header type
    struct.pack_into(">I", unreadable, len(unreadable) - 4, __import__("zlib").crc32(bytes(unreadable[:-4])))
    cut = message_starts(SOUND)[3]
    parts = [SOUND[:cut], b"\x00garbage" * 3, es_exception("throttlingException", "slow down"), odd_headers,
             bytes(unreadable), SOUND[cut:]]
    result = agree(both, b"".join(parts), "bedrock")
    assert [e.kind for e in result.errors] == ["malformed chunk", "in-band error", "unexpected shape",
                                               "malformed chunk"]
    assert "skipped 24 bytes" in str(result.errors[0]) and "throttlingException" in str(result.errors[1])
    assert "unknown header type 99" in str(result.errors[3])


def test_messages_over_the_limit_and_a_cut_end(both):
    big = es_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 5000}})
    cut = message_starts(SOUND)[3]
    body = SOUND[:cut] + big + SOUND[cut:] + big[:40]
    result = agree(both, body, "bedrock", limits=Limits(event_bytes=1000))
    assert [(e.kind, e.offset) for e in result.errors] == [("limit", cut), ("limit", len(SOUND) + len(big))]
    result = agree(both, SOUND + big[:40], "bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(SOUND))]


@pytest.mark.parametrize("seed", range(40))
def test_mangled_streams(both, seed):
    rng = random.Random(seed)
    data = bytearray(SOUND)
    for _ in range(rng.randint(1, 5)):
        pos = rng.randrange(len(data))
        if rng.random() < 0.5:
            data[pos] ^= 1 << rng.randrange(8)
        else:
            data[pos:pos + rng.randint(0, 20)] = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 20)))
    agree(both, bytes(data), "bedrock", seeds=range(2))
    agree(both, bytes(data), "auto", seeds=range(1))


@pytest.mark.parametrize("total", [0x5C000000, 0x01000010, 0x00000100])
def test_a_sound_looking_prelude_inside_skipped_bytes(both, total):
    # Damaged bytes that hold a prelude whose CRC matches: while skipping, only one with a zero first
    # byte counts (_resync's test), however the reads are cut (found by fuzzing: a read ending inside
    # the skipped bytes used to let the next read take a prelude the whole body skips).
    head = struct.pack(">II", total, 20)
    crafted = head + struct.pack(">I", __import__("zlib").crc32(head))
    cut = message_starts(SOUND)[3]
    body = SOUND[:cut] + b"\x00garbage" + crafted + b"more garbage" + SOUND[cut:]
    result = agree(both, body, "bedrock")
    assert [c.name for c in result.tool_calls] == [c.name for c in CALLS]
    assert result.errors[0].kind == "malformed chunk" and result.errors[0].offset == cut
