# Included by _accumulator_c.pyx: the debug counters of which path each event took.

# Which way each event went, for tests that must see a fast path taken: one increment per event.
# Indexes 1-7 are the FMT_* codes (an event a format's fast path applied); framings count the
# events they handed over ("framed-sse-direct": one data line read in place without a copy,
# "framed-elsewhere": framed by _wire.framing, not here; "sse-done": a [DONE] ended the stream in place).
cdef enum:
    PATH_GENERAL = 0
    PATH_GEMINI_PIECE = 8
    FRAMED_SSE = 9
    FRAMED_NDJSON = 10
    FRAMED_EVENTSTREAM = 11
    FRAMED_JSONARRAY = 12
    FRAMED_ELSEWHERE = 13
    FRAMED_SSE_DIRECT = 14
    PATH_GEMINI_REPEAT = 15
    PATH_RESPONSES_DELTA = 16
    PATH_COHERE_DELTA = 17
    PATH_ANTHROPIC_DELTA = 18
    PATH_BEDROCK_DELTA = 19
    PATH_SSE_DONE = 20
    N_PATHS = 21
cdef Py_ssize_t _paths[N_PATHS]
_PATH_NAMES = (("general",) + tuple(sorted(_registry.FAST_CODES, key=_registry.FAST_CODES.get))  # by FMT_* code
               + ("gemini-piece", "framed-sse", "framed-ndjson", "framed-eventstream", "framed-jsonarray",
               "framed-elsewhere", "framed-sse-direct", "gemini-repeat", "responses-delta", "cohere-delta", "anthropic-delta", "bedrock-delta",
               "sse-done"))
assert _PATH_NAMES[PATH_GEMINI_PIECE] == "gemini-piece", "one FMT_* code per registered fast path, 1 to 7"


def _path_counts():
    """Return how many events took each path since the last reset (debug counters for tests)."""
    return {name: _paths[k] for k, name in enumerate(_PATH_NAMES)}


def _reset_path_counts():
    """Set every path counter back to zero."""
    memset(_paths, 0, sizeof(_paths))
