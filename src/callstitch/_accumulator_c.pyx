# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled twin of the accumulator: SSE framing, chunk reading and the append path in C.

It does exactly what _accumulator_py.py does; the tests hold both to identical results. For
OpenAI-style chat chunks it reads the JSON envelope on demand (_c/chat.h) and unescapes each
argument string straight into its call's bytearray, creating no Python object per event. Any
event it does not fully understand goes to the shared general path (_dispatch, orjson).
"""

from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE,
                                 PyByteArray_Resize)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t
from libc.string cimport memchr, memcmp, memcpy, memmove, memset, strlen

from ._formats import dispatch as _dispatch
from ._formats import registry as _registry
from ._wire import framing as _framing
from ._limits import CUT_CALL_BYTES, CUT_STREAM_BYTES, as_numbers, event_dropped, line_dropped, text_named
from ._results import ToolCall
from ._state import STRAY_KEPT, RawJSON, StreamState, finalized
from ._formats import anthropic as _anthropic
from ._formats import cohere as _cohere
from ._formats import gemini as _gemini
from ._formats import openai_responses as _responses
from ._turns import ollama as _turn_ollama
from ._turns import openai_chat as _turn_chat
from ._exactjson import exact as _exact
from ._exactjson import loads_exact as _loads_exact_py
from ._text import compact_json, escape_surrogate
from orjson import JSONDecodeError
from orjson import loads as _loads

__all__ = ["Accumulator"]

cdef extern from "_c/scan.h" nogil:
    enum:
        CS_ABSENT
        CS_NULL
        CS_STR
        CS_MAX_CHOICES
        CS_MAX_FRAGS
    ctypedef struct cs_span:
        const unsigned char *p
        Py_ssize_t n
        int kind
        int has_esc
    ctypedef struct cs_frag:
        int has_index
        int64_t index
        cs_span id
        cs_span name
        cs_span args
    ctypedef struct cs_choice:
        int64_t index
        cs_span content
        cs_span reasoning_content
        cs_span reasoning
        cs_span refusal
        cs_span finish_reason
        int first_frag
        int n_frags
    ctypedef struct cs_chunk:
        int n_choices
        cs_choice choices[8]
        int n_frags
        cs_frag frags[32]
        unsigned env
        cs_span env_str[4]
        int64_t created
        int reasoning
        const unsigned char *usage
        Py_ssize_t usage_n
    int cs_scan_chat_chunk(const unsigned char *p, Py_ssize_t n, cs_chunk *out, unsigned want)
    Py_ssize_t cs_unescape(const unsigned char *p, Py_ssize_t n, unsigned char *dst)
    enum:
        CS_T_ABSENT
        CS_T_NULL
        CS_T_STR
        CS_T_INT
        CS_T_OTHER
        CS_T_ARRAY
    ctypedef struct cs_want:
        const char *path[11]
        int allowed
    ctypedef struct cs_val:
        int kind
        const unsigned char *p
        Py_ssize_t n
        int has_esc
        int64_t i
    int cs_extract(const unsigned char *p, Py_ssize_t n, const cs_want *wants, int nwants, cs_val *out)
    const unsigned char *cs_str(const unsigned char *p, const unsigned char *e, int *esc)
    int cs_items(const unsigned char *p, Py_ssize_t n, const unsigned char **starts, Py_ssize_t *lens, int max)
    ctypedef struct cs_ocall:
        cs_span id
        cs_span name
        cs_val index
        const unsigned char *args
        Py_ssize_t args_n
        bint long_run
    ctypedef struct cs_oline:
        cs_span content
        cs_span thinking
        Py_ssize_t head_n
        int done
        cs_span reason
        cs_val prompt_eval_count
        cs_val eval_count
    int cs_ollama_line(const unsigned char *p, Py_ssize_t n, cs_oline *line, cs_ocall *calls, int max)
    bint cs_same(const unsigned char *p, const char *lit, size_t n)
    Py_ssize_t cs_compact(const unsigned char *p, Py_ssize_t n, unsigned char *out)
    bint cs_long_digit_run(const unsigned char *p, Py_ssize_t n)

cdef extern from "_c/eventstream.h" nogil:
    void es_crc_init()
    unsigned int es_crc32(const unsigned char *p, size_t n)
    unsigned int es_be32(const unsigned char *p)
    int es_prelude_ok(const unsigned char *p)

es_crc_init()

include "_c/paths.pxi"


cdef inline object _framing_at_once(const unsigned char *p, Py_ssize_t n, object fallback, Py_ssize_t blanks):
    """Return the framing of a body starting with these bytes (as _framing.choose decides), or None.

    None for the first bytes after which it needs more (whitespace, a BOM's first byte:
    _framing.UNTOLD_AFTER), or a "{" with only spaces after it in this read (its line's end tells:
    _framing._after_brace); fallback, the format's own, for a first byte that tells nothing.
    """
    cdef unsigned char first = p[0]
    cdef Py_ssize_t i = 1
    if first == b'{':
        while i < n and (p[i] == b' ' or p[i] == b'\t'):
            i += 1
        if i - 1 > blanks:
            return fallback
        if i == n:
            return None
        return _JSONDOCS if p[i] == b'\r' or p[i] == b'\n' else _NDJSON
    if first == b'[':
        return _JSONARRAY
    if first == 0:
        return _EVENTSTREAM
    if first == b' ' or first == b'\t' or first == b'\r' or first == b'\n' or first == 0xEF:
        return None
    return fallback


include "_c/values.pxi"


def _crc32(bytes data):
    """Return the event stream's CRC-32 of data, as the framing computes it (for tests)."""
    return es_crc32(<const unsigned char *><char *>data, len(data))


include "_c/counters.pxi"


cdef int _CUT_CALL_BYTES = CUT_CALL_BYTES
cdef int _CUT_STREAM_BYTES = CUT_STREAM_BYTES

# orjson writes no JSON value more than 4.5 times as long as it can be sent (1e15 becomes
# 1000000000000000.0; strings, literals and structure never grow): a bound on a call's compact text.
cdef Py_ssize_t _GROWTH = 5

cdef frozenset _KNOWN_FORMATS = frozenset(_registry.names())  # one registered later: check_format
cdef tuple _DEFAULT_NUMBERS = as_numbers(None)
cdef object _handle_event = _dispatch.handle_event
cdef object _ChatTurn = _turn_chat.ChatTurn
cdef object _route_framing = _framing.route
cdef object _finish_framing = _framing.finish
cdef object _fed_view = _framing.fed_view
cdef object _close = _dispatch.close
cdef object _SSE = _framing.SSE
cdef object _NDJSON = _framing.NDJSON
cdef object _EVENTSTREAM = _framing.EVENTSTREAM
cdef object _JSONARRAY = _framing.JSONARRAY
cdef object _JSONDOCS = _framing.JSONDOCS
cdef tuple _JSON_VALUES = _framing.JSON_VALUES
cdef tuple _OWN_FRAMINGS = (_framing.SSE, _framing.NDJSON, _framing.EVENTSTREAM,
                            _framing.JSONARRAY, _framing.JSONDOCS)  # framed here, in place
cdef object _read_headers = _framing.read_headers
cdef object _handle_object = _dispatch.handle_object
cdef const unsigned char *_BOM = b"\xef\xbb\xbf"


from ._slots cimport ChoiceState, Slot, SlotBook, Text, _follow_cut, _unshare
include "_c/slots.pxi"


cdef class Accumulator(SlotBook):
    """Accumulator(format='auto', limits=None)
--

Reassemble the tool calls of one streamed response.

    Feed it the raw response bytes as they arrive (``feed``), parsed chunks (``feed_chunk``) or
    fragments (``add``), then call ``finalize`` once for the Result.
    """
    # The object is allocated anew for each response: kept under 1016 bytes (malloc's per-thread cache
    # serves blocks up to 1032, the GC header included), its allocation is a few instructions, not
    # malloc's slow path (some 400 a response). Scratch space belongs on the stack of its function.
    cdef object _turn  # state.turn once made: the fast paths reach the turn record without a lookup
    cdef bint _fast
    cdef int _fmt
    cdef bint _skipping  # dropping the rest of an over-long line
    cdef const unsigned char *_cr_free  # within the read being framed: no CR before this
    cdef bint _halting  # stop right after the stream's terminator (batch reprocessing)
    cdef bint _ended_seen  # … and state.ended, read after each event that took the general path (only it sets it)
    cdef Py_ssize_t _halted_at  # where in the last fed data that happened, or -1
    cdef bint _halt_lf  # ended at a CR that ended the read: halted() waits to see if an LF follows
    cdef bint _dropping  # dropping the rest of an event that went over the limit
    cdef bint _auto
    cdef bint _seen  # state.recognised, as last read: until then every event takes the general path
    # The Gemini fast path's hold on state.turn (_c/fast_gemini.pxi): the record, its log, the log's
    # length after this path last wrote to it (-1 once the general path has had an event: it may
    # have logged, or folded, since, and the two notes below no longer hold), the last envelope it
    # logged, the open text run it last logged.
    cdef object _gem_turn
    cdef list _gem_log
    cdef Py_ssize_t _gem_logged
    cdef bytes _gem_env
    cdef long long _gem_run
    # The last string piece that said more follows (_gemini_repeat): its chunk's bytes before the
    # piece's text (_gem_rep_head of them) then from its closing quote (_gem_rep_tail, -1: none kept),
    # in a buffer of _gem_rep_cap bytes; where its usage lay (-1: none), its choice, jsonPath, envelope.
    cdef char *_gem_rep
    cdef Py_ssize_t _gem_rep_head, _gem_rep_tail, _gem_rep_cap, _gem_rep_n, _gem_rep_usage, _gem_rep_usage_n
    cdef object _gem_rep_choice, _gem_rep_path
    cdef bytes _gem_rep_env
    # The slot the last item_id (Responses) went to; cleared with _cache_slot.
    cdef bytes _item_key
    cdef Slot _item_slot
    cdef bint _in_place  # the framing is known and this twin frames it itself (SSE, NDJSON, event stream)
    cdef bint _nd  # … and it is NDJSON: one JSON document per line
    cdef bint _es  # … or the AWS event stream: the state of its framing follows
    cdef bint _ja  # … or JSON values (an array: Gemini without alt=sse; pretty-printed documents): its state follows
    cdef bint _ja_open  # inside the array: "[" seen, "]" not yet
    cdef bint _ja_in  # inside an element (its bytes so far in _tail, unless they are read in place)
    cdef bint _ja_str, _ja_esc, _ja_scalar, _ja_drop
    cdef Py_ssize_t _ja_depth, _ja_start, _ja_size
    cdef Py_ssize_t _es_drop  # bytes still to drop of a message over Limits.event_bytes
    cdef Py_ssize_t _es_skipped  # where bytes began to be skipped after a damaged prelude, or -1
    cdef dict _es_headers  # header blocks already read (as _framing.read_headers keeps them)
    cdef bytes _es_last_raw  # the last header block, and what it said
    cdef object _es_last_headers
    # SSE framing state
    cdef bytearray _tail
    cdef Py_ssize_t _offset
    cdef bint _started
    cdef bint _skip_lf
    cdef char *_data
    cdef Py_ssize_t _data_len
    cdef Py_ssize_t _data_cap
    cdef Py_ssize_t _data_lines
    cdef Py_ssize_t _data_offset
    cdef object _event_name
    cdef bytes _event_raw  # the last event name as sent, and as str
    cdef object _event_text
    cdef cs_chunk *_chunk  # the last chat chunk read in place (allocated for chat streams only: it is 4 KB)
    cdef unsigned _env_have  # the turn's envelope fields already known (ChatTurn.have), as last read
    # The slot the last indexed fragment went to: a continuation of it needs no dict lookups.
    # Every _route clears it, since only _route changes which slot an index maps to.
    cdef Slot _cache_slot
    cdef ChoiceState _cache_cs
    cdef int64_t _cache_choice
    cdef int64_t _cache_index
    # Anthropic: the index of the block whose text (0) and thinking (1) deltas the fast path may take, or -1;
    # set only when the block starts on the fast path, cleared by any event that takes another way
    cdef int64_t _anth_open[2]

    def __cinit__(self):
        self._data = NULL
        self._chunk = NULL
        self._gem_rep = NULL
        self._gem_rep_tail = -1

    def __init__(self, format="auto", limits=None):
        self._start(StreamState(format if format in _KNOWN_FORMATS else _dispatch.check_format(format)),
                    _DEFAULT_NUMBERS if limits is None else as_numbers(limits))
        self._halted_at = -1
        self._es_skipped = -1
        self._anth_open[0] = self._anth_open[1] = -1
        self._fast = format == "openai-chat"
        self._fmt = _FORMAT_CODES.get(format, FMT_OTHER)
        self._auto = format == "auto"
        self._in_place = False  # the first bytes tell the framing (_feed_data)
        self._nd = False
        self._tail = bytearray()
        self._event_name = None

    def __dealloc__(self):
        PyMem_Free(self._data)
        PyMem_Free(self._chunk)
        PyMem_Free(self._gem_rep)

    # ---------------------------------------------------------------- framing

    def feed(self, data):
        """Feed raw response bytes, split anywhere (mid-line, mid-CRLF, mid-character).

        Return the calls this data completed (closed by the protocol), each handed over once.
        """
        if self._result is not None:
            raise finalized("feed")
        self._feed_data(data)
        if not self._done:
            return []
        done = self._done
        self._done = []
        return done

    cdef int _feed_data(self, object data) except -1:
        cdef const unsigned char[::1] view
        cdef Py_ssize_t held = 0  # bytes of earlier reads that routing puts in front of this one
        if isinstance(data, str):
            data = (<str>data).encode("utf-8", "surrogatepass")  # as _accumulator_py does (why: there)
        elif not isinstance(data, bytes):
            data = _fed_view(data)
        if not self._in_place:
            if not isinstance(data, bytes):
                data = bytes(data)
            if not data:
                return 0
            self._fed = True
            state = self._state
            framing = None if state.framing is not None or state.head else \
                _framing_at_once(<const unsigned char *><char *>data, len(<bytes>data), state.fallback,
                                 state.event_limit)
            if framing is not None:  # what _framing.route() decides for it, without the call
                state.framing = framing
            else:
                held = -len(<bytes>data)
                data = _route_framing(self, state, data, _OWN_FRAMINGS)
                if data is None:
                    return 0
                held += len(<bytes>data)
                framing = state.framing
            self._in_place = True
            self._nd = framing == _NDJSON
            self._es = framing == _EVENTSTREAM
            self._ja = framing in _JSON_VALUES
            if held > 0:
                self._feed(<const unsigned char *><char *>data, len(<bytes>data))
                if self._halted_at >= 0:  # halted() counts this read's bytes only, as the pure twin's does
                    self._halted_at = max(0, self._halted_at - held)
                return 0
        if isinstance(data, bytes):
            return self._feed(<const unsigned char *><char *>data, len(<bytes>data))
        view = memoryview(data).cast("B")
        if view.shape[0]:
            self._feed(&view[0], view.shape[0])
        return 0

    def halt_at_end(self):
        """Stop consuming right after the stream's terminator; halted() then says where it was (Halting, in sink.py)."""
        self._halting = True
        if self._state.ended and self._halted_at < 0:
            self._halted_at = 0

    def halted(self):
        """Return how many bytes of the last fed data belonged to this stream, once it ended; else -1."""
        return self._halted_at

    cdef inline bint _ended(self) noexcept:
        return self._halting and self._ended_seen

    cdef inline void _halt(self, Py_ssize_t used, bint read_used_up) noexcept:
        """Stop after used bytes of the read; after a CR that ended it, wait for the next byte (an LF is this stream's)."""
        if read_used_up and self._skip_lf:
            self._halt_lf = True
        else:
            self._halted_at = used

    cdef int _feed(self, const unsigned char *p, Py_ssize_t n) except -1:
        cdef const unsigned char *origin = p  # for a halt: where this read began
        cdef Py_ssize_t fed = n
        cdef Py_ssize_t k
        if n == 0 or self._halted_at >= 0:
            return 0
        if self._halt_lf:  # the stream ended at a CR that ended the last read: an LF next is its too
            self._halt_lf = self._skip_lf = False
            self._halted_at = 1 if p[0] == b'\n' else 0
            return 0
        self._fed = True
        if self._es:
            return self._feed_messages(p, n)
        if not self._started:
            k = self._take_bom(p, n)
            if k < 0:
                return 0
            p += k
            n -= k
        if self._nd:
            return self._feed_lines(p, n)
        if self._ja:
            return self._feed_array(p, n)
        return self._feed_sse(p, n, origin, fed)

    cdef inline Py_ssize_t _take_bom(self, const unsigned char *p, Py_ssize_t n) except -2:
        """Take the UTF-8 BOM that may open the stream, possibly split across reads.

        Return how many bytes of p it took, or -1 when all of p may still be the start of one.
        """
        cdef Py_ssize_t k = PyByteArray_GET_SIZE(self._tail)
        cdef Py_ssize_t taken = 0
        while k < 3 and taken < n and p[taken] == _BOM[k]:
            self._tail.append(p[taken])
            taken += 1
            k += 1
        if k == 3:
            self._offset += 3
            del self._tail[:]
        elif taken == n:
            return -1
        self._started = True
        # A partial BOM was ordinary bytes after all: they stay in the tail as line text.
        return taken

    cdef int _feed_sse(self, const unsigned char *p, Py_ssize_t n, const unsigned char *origin,
                       Py_ssize_t fed) except -1:
        """Frame SSE in place: the line carried over first, then line by line; origin and fed are the read's."""
        cdef const unsigned char *end = p + n
        cdef const unsigned char *nl
        cdef Py_ssize_t m
        cdef int k
        m = self._sse_resume(p, n, origin, fed)
        if m < 0:
            return 0
        p += m
        while p < end:
            nl = self._line_end(p, end)
            if nl == NULL:
                self._tail.extend((<const char *>p)[:end - p])
                return self._check_tail()
            m = nl - p
            if m > self._max_event:
                line_dropped(self._state, self._max_event, self._offset)
                self._drop_event()
                self._offset += m
                p = self._after_eol(nl, end)
                if p == NULL:
                    return 0
                continue
            # The common event, one data line and a blank line (LF, or CRLF as Gemini sends),
            # read in place without a copy.
            k = self._whole_event_end(p, m, nl, end)
            if k:
                self._data_offset = self._offset
                _paths[FRAMED_SSE_DIRECT] += 1
                if m > 5 and p[5] == b' ':
                    self._dispatch_payload(p + 6, m - 6)
                else:
                    self._dispatch_payload(p + 5, m - 5)
                self._offset += m + k
                p = nl + k
            else:
                self._line(p, m, self._offset)
                self._offset += m
                p = self._after_eol(nl, end)
            if self._ended():
                self._halt(fed if p == NULL else p - origin, p == NULL)
                return 0
            if p == NULL:
                return 0
        return 0

    cdef Py_ssize_t _sse_resume(self, const unsigned char *p, Py_ssize_t n, const unsigned char *origin,
                                Py_ssize_t fed) except -2:
        """Take what the last read left open (a CR's LF, a line being dropped, a carried line) from the read at p.

        Return how many of its n bytes that took, or -1 when nothing of the read is left to frame.
        """
        cdef const unsigned char *start = p
        cdef const unsigned char *end = p + n
        cdef const unsigned char *nl
        if self._skip_lf:
            self._skip_lf = False
            if p[0] == b'\n':
                self._offset += 1
                p += 1
                if p == end:
                    return -1
        self._cr_free = p  # no byte of this read is known CR-free yet
        if self._skipping:
            # The rest of a line over Limits.event_bytes: drop it up to its line end.
            nl = self._line_end(p, end)
            if nl == NULL:
                self._offset += end - p
                return -1
            self._skipping = False
            self._offset += nl - p
            p = self._after_eol(nl, end)
            if p == NULL:
                return -1
        if PyByteArray_GET_SIZE(self._tail):
            # Finish the line carried over from the last read, then go on in place.
            nl = self._line_end(p, end)
            if nl == NULL:
                self._tail.extend((<const char *>p)[:end - p])
                self._check_tail()
                return -1
            self._end_tail(p, nl - p)
            p = self._after_eol(nl, end)
            if self._ended():
                self._halt(fed if p == NULL else p - origin, p == NULL)
                return -1
            if p == NULL:
                return -1
        return p - start

    cdef inline int _whole_event_end(self, const unsigned char *p, Py_ssize_t m, const unsigned char *nl,
                                     const unsigned char *end) noexcept:
        """The length of the line end and blank line after a data line that is a whole event by itself, else 0."""
        if m < 5 or self._data_lines or self._dropping or not cs_same(p, b"data:", 5):
            return 0
        if nl[0] == b'\n' and nl + 1 < end and nl[1] == b'\n':
            return 2
        if nl[0] == b'\r' and nl + 3 < end and nl[1] == b'\n' and nl[2] == b'\r' and nl[3] == b'\n':
            return 4
        return 0

    cdef int _end_tail(self, const unsigned char *p, Py_ssize_t n) except -1:
        """Join the line carried over from the last read with its n-byte end at p, and handle it."""
        cdef Py_ssize_t m
        self._tail.extend((<const char *>p)[:n])
        m = PyByteArray_GET_SIZE(self._tail)
        if m > self._max_event:
            line_dropped(self._state, self._max_event, self._offset)
            self._drop_event()
        else:
            self._line(<const unsigned char *>PyByteArray_AS_STRING(self._tail), m, self._offset)
        del self._tail[:]
        self._offset += m
        return 0

    cdef int _feed_lines(self, const unsigned char *p, Py_ssize_t n) except -1:
        """Frame NDJSON: hand over each line (split at LF only), exactly as _framing.NDJSONFramer does."""
        cdef const unsigned char *end = p + n
        cdef const unsigned char *nl
        cdef Py_ssize_t m
        if self._skipping:
            # The rest of a line over Limits.event_bytes: drop it up to its LF.
            nl = <const unsigned char *>memchr(p, b'\n', n)
            if nl == NULL:
                self._offset += n
                return 0
            self._skipping = False
            self._offset += nl - p + 1
            p = nl + 1
        if PyByteArray_GET_SIZE(self._tail) and p < end:
            nl = <const unsigned char *>memchr(p, b'\n', end - p)
            if nl == NULL:
                self._tail.extend((<const char *>p)[:end - p])
                return self._check_tail()
            self._tail.extend((<const char *>p)[:nl - p])
            m = PyByteArray_GET_SIZE(self._tail)
            self._nd_line(<const unsigned char *>PyByteArray_AS_STRING(self._tail), m, self._offset)
            del self._tail[:]
            self._offset += m + 1
            p = nl + 1
        while p < end:
            nl = <const unsigned char *>memchr(p, b'\n', end - p)
            if nl == NULL:
                self._tail.extend((<const char *>p)[:end - p])
                return self._check_tail()
            m = nl - p
            self._nd_line(p, m, self._offset)
            self._offset += m + 1
            p = nl + 1
        return 0

    cdef int _feed_array(self, const unsigned char *p, Py_ssize_t n) except -1:
        """Frame a JSON-array body in place, exactly as _framing.JSONArrayFramer does."""
        cdef Py_ssize_t i = 0, seg
        cdef unsigned char c
        cdef bint done, here
        while i < n:
            here = False
            if not self._ja_in:
                c = p[i]
                if c == b' ' or c == b'\t' or c == b'\r' or c == b'\n' or c == b',':
                    i += 1
                    continue
                if c == b'[' and not self._ja_open:  # the array opens (again, for arrays back to back)
                    self._ja_open = True
                    i += 1
                    continue
                if c == b']' and self._ja_open:  # the array ends, and with it the stream
                    self._ja_open = False
                    self._state.complete = True
                    self._state.ended = True
                    self._complete_all()
                    i += 1
                    continue
                self._ja_in = True
                self._ja_start = self._offset + i
                self._ja_size = 0
                self._ja_drop = False
                self._ja_str = c == b'"'
                self._ja_scalar = c != b'{' and c != b'[' and c != b'"'
                self._ja_depth = 1 if c == b'{' or c == b'[' else 0
                here = True  # the element starts in this read: it may be read in place
                seg = i
                i += 1
            else:
                seg = i
            i, done = self._array_scan(p, i, n)
            if done and here and not self._ja_drop:
                self._ja_size = i - seg
                if self._ja_size > self._max_event:
                    _framing.element_dropped(self._state, self._max_event, self._ja_start, self._ja_open)
                    self.cut_open()
                    self._ja_drop = True
                self._array_element(p + seg, i - seg)
            else:
                self._array_take(p + seg, i - seg)
                if done:
                    self._array_element(<const unsigned char *>PyByteArray_AS_STRING(self._tail),
                                        PyByteArray_GET_SIZE(self._tail))
        self._offset += n
        return 0

    cdef (Py_ssize_t, bint) _array_scan(self, const unsigned char *p, Py_ssize_t i, Py_ssize_t n):
        """Read on inside an element from p[i]; return where its bytes in p end, and whether it ended."""
        cdef unsigned char c
        while i < n:
            c = p[i]
            if self._ja_esc:
                self._ja_esc = False
            elif self._ja_scalar:
                if (c == b' ' or c == b'\t' or c == b'\r' or c == b'\n' or c == b',' or c == b'[' or c == b']'
                        or c == b'{' or c == b'}' or c == b'"'):
                    return i, True  # the separator is not the element's
            elif self._ja_str:
                if c == b'\\':
                    self._ja_esc = True  # the next byte is escaped, even in the next read
                elif c == b'"':
                    self._ja_str = False
                    if self._ja_depth <= 0:
                        return i + 1, True
            elif c == b'"':
                self._ja_str = True
            elif c == b'{' or c == b'[':
                self._ja_depth += 1
            elif c == b'}' or c == b']':
                self._ja_depth -= 1
                if self._ja_depth <= 0:
                    return i + 1, True
            i += 1
        return n, False

    cdef int _array_take(self, const unsigned char *p, Py_ssize_t n) except -1:
        """Keep n more bytes of the element being received, within Limits.event_bytes."""
        self._ja_size += n
        if self._ja_drop:
            return 0
        if self._ja_size > self._max_event:
            _framing.element_dropped(self._state, self._max_event, self._ja_start, self._ja_open)
            self.cut_open()
            self._ja_drop = True
            del self._tail[:]
            return 0
        self._tail.extend((<const char *>p)[:n])
        return 0

    cdef int _array_element(self, const unsigned char *p, Py_ssize_t n) except -1:
        """The element being received is whole: hand it over (unless it was dropped), as _finish does."""
        cdef bint dropped = self._ja_drop
        self._ja_in = self._ja_str = self._ja_esc = self._ja_scalar = self._ja_drop = False
        self._ja_depth = 0
        if not dropped and n:
            self._event_name = None
            self._data_offset = self._ja_start
            _paths[FRAMED_JSONARRAY] += 1
            self._dispatch_payload(p, n)
        del self._tail[:]
        return 0

    cdef int _feed_messages(self, const unsigned char *p, Py_ssize_t n) except -1:
        """Frame the AWS event stream in place, exactly as _framing.EventStreamFramer.feed does."""
        cdef Py_ssize_t used, m
        if self._es_drop:
            if n <= self._es_drop:
                self._es_drop -= n
                self._offset += n
                return 0
            self._offset += self._es_drop
            p += self._es_drop
            n -= self._es_drop
            self._es_drop = 0
        m = PyByteArray_GET_SIZE(self._tail)
        if m:
            self._tail.extend((<const char *>p)[:n])
            used = self._messages(<const unsigned char *>PyByteArray_AS_STRING(self._tail), m + n)
            del self._tail[:used]
        else:
            used = self._messages(p, n)
            if used < n:
                self._tail.extend((<const char *>p)[used:n])
        self._offset += used
        return 0

    cdef Py_ssize_t _messages(self, const unsigned char *b, Py_ssize_t size) except -1:
        """Hand over every whole message in b (b[0] is at _offset); return how many bytes are done with."""
        cdef Py_ssize_t pos = 0, end, total, head
        while size - pos >= 12:
            # While skipping damaged bytes, a prelude must also start with a zero byte (as EventStreamFramer).
            if not es_prelude_ok(b + pos) or (self._es_skipped >= 0 and b[pos] != 0):
                if self._es_skipped < 0:
                    self._es_skipped = self._offset + pos
                pos += 1  # search on for the next sound prelude
                while size - pos >= 12 and not (b[pos] == 0 and es_prelude_ok(b + pos)):
                    pos += 1
                continue
            if self._es_skipped >= 0:
                _framing.skipped(self, self._state, self._es_skipped, self._offset + pos)
                self._es_skipped = -1
            total = es_be32(b + pos)
            if total > self._max_event:
                # A message over Limits.event_bytes is dropped as it arrives, never held.
                line_dropped(self._state, self._max_event, self._offset + pos, "message")
                self.cut_open()
                if size - pos < total:
                    self._es_drop = total - (size - pos)
                    return size
                pos += total
                continue
            if size - pos < total:
                break
            end = pos + total - 4
            if es_crc32(b + pos, total - 4) != es_be32(b + end):
                _framing.crc_mismatch(self, self._state, self._offset + pos)
            else:
                head = es_be32(b + pos + 4)
                self._message(b + pos + 12, head, b + pos + 12 + head, end - pos - 12 - head, self._offset + pos)
            pos += total
        return pos

    cdef int _message(self, const unsigned char *raw, Py_ssize_t rn, const unsigned char *payload, Py_ssize_t pn,
                      Py_ssize_t offset) except -1:
        """Hand over one message, as EventStreamFramer._message does: an event, or an exception recorded."""
        last = self._es_last_raw
        if last is not None and len(last) == rn and memcmp(<const char *>last, raw, rn) == 0:
            headers = self._es_last_headers
        else:
            if self._es_headers is None:
                self._es_headers = {}
            key = (<const char *>raw)[:rn]
            headers = _read_headers(self, self._state, self._es_headers, key, offset)
            if headers is None:
                return 0
            self._es_last_raw = key
            self._es_last_headers = headers
        kind = headers.get(":message-type", "event")
        if kind == "event":
            self._event_name = headers.get(":event-type")
            self._data_offset = offset
            _paths[FRAMED_EVENTSTREAM] += 1
            self._dispatch_payload(payload, pn)
        else:
            _framing.not_an_event(self._state, headers, kind, (<const char *>payload)[:pn], offset)
        return 0

    cdef int _nd_line(self, const unsigned char *p, Py_ssize_t n, Py_ssize_t pos) except -1:
        """Handle one NDJSON line (without its LF): dropped when too long, skipped when blank."""
        cdef Py_ssize_t k
        if n > self._max_event:
            line_dropped(self._state, self._max_event, pos)
            self.cut_open()
            return 0
        for k in range(n):
            if p[k] != b' ' and p[k] != b'\t' and p[k] != b'\r' and p[k] != b'\n':
                self._event_name = None
                self._data_offset = pos
                _paths[FRAMED_NDJSON] += 1
                return self._dispatch_payload(p, n)
        return 0

    cdef int _check_tail(self) except -1:
        """Drop the line being received when it is over Limits.event_bytes, and skip to its end.

        An SSE line takes its event with it; an NDJSON line is the whole event.
        """
        cdef Py_ssize_t m = PyByteArray_GET_SIZE(self._tail)
        if m > self._max_event:
            line_dropped(self._state, self._max_event, self._offset)
            self._offset += m
            del self._tail[:]
            self._skipping = True
            if not self._nd:
                self._drop_event()
            else:
                self.cut_open()
        return 0

    cdef int _drop_event(self) except -1:
        """Forget the event being received; ignore its lines up to the blank line that ends it."""
        self._data_len = 0
        self._data_lines = 0
        self._dropping = True
        self.cut_open()
        return 0

    cdef inline const unsigned char *_line_end(self, const unsigned char *p, const unsigned char *end) noexcept:
        """Return where the line starting at p ends (its CR or LF), or NULL when it does not end here.

        Each byte is searched for a CR once per read (_cr_free marks how far none was found), so
        a read costs the same whether it is fed once or in pieces.
        """
        cdef const unsigned char *nl = <const unsigned char *>memchr(p, b'\n', end - p)
        cdef const unsigned char *stop = nl if nl != NULL else end
        cdef const unsigned char *q
        cdef const unsigned char *cr
        if stop > self._cr_free:
            q = p if p > self._cr_free else self._cr_free
            cr = <const unsigned char *>memchr(q, b'\r', stop - q)
            if cr != NULL:
                self._cr_free = cr
                return cr
            self._cr_free = stop
        return nl

    cdef inline const unsigned char *_after_eol(self, const unsigned char *nl, const unsigned char *end) noexcept:
        """Step over the line end at nl, keeping _offset in step; NULL when the read is used up."""
        if nl[0] == b'\r':
            if nl + 1 == end:
                self._skip_lf = True  # a following LF, in the next read, belongs to this CR
                self._offset += 1
                return NULL
            if nl[1] == b'\n':
                self._offset += 2
                return nl + 2 if nl + 2 < end else NULL
        self._offset += 1
        return nl + 1 if nl + 1 < end else NULL

    cdef int _line(self, const unsigned char *p, Py_ssize_t n, Py_ssize_t pos) except -1:
        """Handle one line (without its line end) that starts at stream offset pos."""
        cdef const unsigned char *value
        cdef Py_ssize_t vn, flen
        cdef const unsigned char *colon
        if n == 0:
            if self._dropping:
                self._dropping = False
                self._event_name = None
            elif self._data_lines:
                self._dispatch_event()
            else:
                self._event_name = None
            return 0
        if self._dropping:
            return 0
        if n >= 5 and cs_same(p, b"data:", 5):
            value = p + 5
            vn = n - 5
            if vn and value[0] == b' ':
                value += 1
                vn -= 1
            self._data_add(value, vn, pos)
            return 0
        if p[0] == b':':
            return 0
        colon = <const unsigned char *>memchr(p, b':', n)
        if colon == NULL:
            flen = n
            value = p + n
            vn = 0
        else:
            flen = colon - p
            value = colon + 1
            vn = n - flen - 1
            if vn and value[0] == b' ':
                value += 1
                vn -= 1
        if flen == 4 and cs_same(p, b"data", 4):
            self._data_add(value, 0, pos)
        elif flen == 5 and cs_same(p, b"event", 5):
            # Most streams name every event from a handful of names: reuse the last one's str.
            if not (self._event_raw is not None and len(self._event_raw) == vn
                    and memcmp(<const char *>self._event_raw, value, vn) == 0):
                self._event_raw = (<const char *>value)[:vn]
                self._event_text = self._event_raw.decode("utf-8", "replace")
            self._event_name = self._event_text
        elif not (flen == 2 and cs_same(p, b"id", 2)) and not (flen == 5 and cs_same(p, b"retry", 5)):
            if self._state.stray is None:  # no SSE field: noted, for the error if no event comes
                self._state.note_stray((<const char *>p)[:n if n < STRAY_KEPT else STRAY_KEPT], pos)
        # id, retry and unknown fields carry nothing callstitch needs
        return 0

    cdef int _data_add(self, const unsigned char *value, Py_ssize_t vn, Py_ssize_t pos) except -1:
        cdef Py_ssize_t need = self._data_len + vn + 1
        cdef char *grown
        if self._data_len + vn + (1 if self._data_lines else 0) > self._max_event:
            event_dropped(self._state, self._max_event, self._data_offset if self._data_lines else pos)
            self._drop_event()
            return 0
        if need > self._data_cap:
            grown = <char *>PyMem_Realloc(self._data, need * 2)
            if grown == NULL:
                raise MemoryError()
            self._data = grown
            self._data_cap = need * 2
        if self._data_lines:
            self._data[self._data_len] = b'\n'
            self._data_len += 1
        else:
            self._data_offset = pos
        memcpy(self._data + self._data_len, value, vn)
        self._data_len += vn
        self._data_lines += 1
        return 0

    cdef int _dispatch_event(self) except -1:
        cdef Py_ssize_t n = self._data_len
        self._data_len = 0
        self._data_lines = 0
        _paths[FRAMED_SSE] += 1
        return self._dispatch_payload(<const unsigned char *>self._data, n)

    cdef int _dispatch_payload(self, const unsigned char *data, Py_ssize_t n) except -1:
        """Handle one event's data: on the fast path when the scanner understands it, else the general one."""
        cdef object event = self._event_name
        self._event_name = None
        self._event_at = self._data_offset  # (for the limits' errors: SlotBook._where)
        if self._fmt == FMT_CHAT:
            if self._chunk == NULL:
                self._chunk = <cs_chunk *>PyMem_Malloc(sizeof(cs_chunk))
                if self._chunk == NULL:
                    raise MemoryError()
            if (event is None and cs_scan_chat_chunk(data, n, self._chunk, 31 & ~self._env_have)
                    and (self._seen or self._chat_seen())
                    and not (self._chunk.reasoning and self._reasoning_to_adapter())):
                if self._chunk.env:
                    self._note_envelope()
                self._apply_chunk()
                _paths[FMT_CHAT] += 1
                return 0
        # (event is None first: several formats name no events, and None != "error" is a slow comparison)
        # Before the stream's format is recognised, an event the fast path takes is its own format's
        # (each fast reader takes only what is plainly its format's until then: see _gemini_chunk).
        elif self._fmt != FMT_OTHER and (event is None or event != "error") and self._fast_event(event, data, n):
            _paths[self._fmt] += 1
            if not self._seen:
                self._seen = True
                self._state.recognised = True
            return 0
        if event is None and n == 6 and memcmp(data, b"[DONE]", 6) == 0:
            # The stream's terminator (OpenAI's, and servers that copy it): what _dispatch.handle_event does.
            _paths[PATH_SSE_DONE] += 1
            self._state.complete = True
            self._state.ended = True
            self._anth_open[0] = self._anth_open[1] = -1
            self._complete_all()
            if self._halting:
                self._ended_seen = True
            return 0
        _paths[PATH_GENERAL] += 1
        # The turn may change: the Anthropic one's open blocks, the Gemini one's log (a fold may
        # shrink it back to the length the fast path noted, so the length alone cannot tell).
        self._anth_open[0] = self._anth_open[1] = -1
        self._gem_logged = -1
        _handle_event(self, self._state, event, PyBytes_FromStringAndSize(<const char *>data, n),
                      self._data_offset, cs_long_digit_run(data, n))
        if self._halting:
            self._ended_seen = self._state.ended
        if not self._seen:
            self._seen = self._state.recognised
        if self._auto and self._state.format != "auto":
            # format="auto" has just learnt the format: the fast path applies from now on if it is chat.
            self._auto = False
            self._fast = self._state.format == "openai-chat"
            self._fmt = _FORMAT_CODES.get(self._state.format, FMT_OTHER)
        if self._fmt == FMT_CHAT and self._state.turn is not None:
            self._env_have = getattr(self._state.turn, "have", 0)
        return 0

    cdef int _note_envelope(self) except -1:
        """Keep the envelope fields the chunk just scanned gave that the turn lacked, as the adapter would."""
        cdef cs_chunk *c = self._chunk
        turn = self._state.turn
        if turn is None:
            turn = self._state.turn = _ChatTurn()
        envelope = turn.envelope
        # (the CS_ENV_* bits: _turns/openai_chat.ENVELOPE; env_str holds id, model, system_fingerprint, service_tier)
        if c.env & 1:
            envelope["id"] = _span_str(&c.env_str[0])
        if c.env & 2:
            envelope["created"] = c.created
        if c.env & 4:
            envelope["model"] = _span_str(&c.env_str[1])
        if c.env & 8:
            envelope["system_fingerprint"] = _span_str(&c.env_str[2])
        if c.env & 16:
            envelope["service_tier"] = _span_str(&c.env_str[3])
        turn.have |= c.env
        self._env_have = turn.have
        return 0

    cdef bint _reasoning_to_adapter(self):
        """Tell whether the chunk just scanned starts a choice's reasoning, or sends it under both names.

        The general adapter notes the name a choice's reasoning first came under, and keeps the
        other name's text of a delta that has both as sent (_formats/openai_chat.py).
        """
        cdef cs_choice *ch
        cdef int i
        cdef list texts
        for i in range(self._chunk.n_choices):
            ch = &self._chunk.choices[i]
            if ch.reasoning_content.kind == CS_STR and ch.reasoning.kind == CS_STR:
                return True
            if ch.reasoning_content.kind == CS_STR or ch.reasoning.kind == CS_STR:
                texts = self._texts.get(ch.index)
                if texts is None or texts[1] is None:
                    return True
        return False

    cdef bint _chat_seen(self):
        """Tell whether the chunk just scanned is a chat event, as _dispatch.foreign would: it has choices.

        Only asked until the first one: it keeps a stream's first chunk on the fast path. A chunk
        without choices goes the general way, which decides.
        """
        if self._chunk.n_choices == 0:
            return False
        self._seen = True
        self._state.recognised = True
        return True

    def event(self, event, bytes data, offset):
        """Handle one event from a framer other than SSE (NDJSON, AWS event stream)."""
        self._event_name = event
        self._data_offset = offset
        _paths[FRAMED_ELSEWHERE] += 1
        self._dispatch_payload(<const unsigned char *><char *>data, len(data))

    cdef int _end_of_stream(self) except -1:
        """Dispatch what the stream left pending: the last event needs no closing blank line."""
        cdef Py_ssize_t m
        if not self._in_place:
            data = _finish_framing(self, self._state, _OWN_FRAMINGS)
            if data is None:
                _close(self, self._state)
                return 0
            self._in_place = True
            self._nd = self._state.framing == _NDJSON
            self._es = self._state.framing == _EVENTSTREAM
            self._ja = self._state.framing in _JSON_VALUES
            self._feed_data(data)
        if self._es:
            # What _framing.EventStreamFramer.end does.
            m = PyByteArray_GET_SIZE(self._tail)
            if self._es_skipped >= 0:
                self._offset += m
                del self._tail[:]
                _framing.skipped(self, self._state, self._es_skipped, self._offset)
                self._es_skipped = -1
            self._es_drop = 0
            m = PyByteArray_GET_SIZE(self._tail)
            if m:
                _framing.ends_inside(self, self._state, bytes(self._tail), self._offset)
                self._offset += m
                del self._tail[:]
            _close(self, self._state)
            return 0
        if self._ja:
            if self._ja_in:  # an element the stream left unfinished: handed over as it is, as end() does
                tail = bytes(self._tail)
                self._array_element(<const unsigned char *><char *>tail, len(tail))
            _close(self, self._state)
            return 0
        if self._nd:
            m = PyByteArray_GET_SIZE(self._tail)
            if m:
                tail = bytes(self._tail)
                del self._tail[:]
                self._nd_line(<const unsigned char *><char *>tail, m, self._offset)
                self._offset += m
            _close(self, self._state)
            return 0
        self._skip_lf = False
        m = PyByteArray_GET_SIZE(self._tail)
        if m:
            tail = bytes(self._tail)
            del self._tail[:]
            self._line(<const unsigned char *><char *>tail, m, self._offset)
            self._offset += m
        if self._data_lines:
            self._dispatch_event()
        _close(self, self._state)
        return 0

    # ---------------------------------------------------------------- the fast path

    cdef int _apply_chunk(self) except -1:
        """Apply a chunk the scanner fully understood: the same effects the general adapter has."""
        cdef cs_chunk *c = self._chunk
        cdef cs_choice *ch
        cdef cs_frag *f
        cdef cs_val usage
        cdef int i, j
        cdef object number
        cdef Slot slot
        for i in range(c.n_choices):
            ch = &c.choices[i]
            number = ch.index
            if ch.content.kind == CS_STR:
                self._text_span(number, 0, &ch.content)
            if ch.reasoning_content.kind == CS_STR:
                self._text_span(number, 1, &ch.reasoning_content)
            if ch.reasoning.kind == CS_STR:
                self._text_span(number, 1, &ch.reasoning)
            if ch.refusal.kind == CS_STR:
                self._text_span(number, 2, &ch.refusal)
            for j in range(ch.first_frag, ch.first_frag + ch.n_frags):
                f = &c.frags[j]
                if (self._cache_slot is not None and f.has_index and f.index == self._cache_index
                        and ch.index == self._cache_choice and f.id.kind != CS_STR and f.name.kind != CS_STR):
                    slot = self._cache_slot
                    self._cache_cs.latest = slot
                else:
                    slot = self._route(number, f.index if f.has_index else None, _span_str(&f.id),
                                       _span_str(&f.name), False)
                    if slot is None:
                        continue  # over a limit on calls or choices: recorded, fragment dropped
                    if f.has_index:
                        self._cache_slot = slot
                        self._cache_cs = self._choices[number]
                        self._cache_choice = ch.index
                        self._cache_index = f.index
                if f.args.kind == CS_STR and f.args.n:
                    self._append_span(slot, &f.args)
            if ch.finish_reason.kind == CS_STR:
                self.choice_finished(number, _span_str(&ch.finish_reason))
                self.complete(number, None)
            elif (ch.n_frags == 0 and ch.content.kind != CS_STR and ch.reasoning_content.kind != CS_STR
                  and ch.reasoning.kind != CS_STR and ch.refusal.kind != CS_STR):
                self.admit_choice(number)  # a choice that said only its role is listed all the same
        if c.usage_n:  # after the choices, as the adapter reads it
            usage.p = c.usage
            usage.n = c.usage_n
            self._raw_usage(&usage)
        return 0

    cdef Slot _known_slot(self, int64_t index):
        """Return choice 0's call at index when it already has arguments (so the adapter has seen it), else None."""
        cdef ChoiceState cs
        cdef Slot slot
        if self._cache_slot is not None and self._cache_choice == 0 and self._cache_index == index:
            slot = self._cache_slot
            cs = self._cache_cs
        else:
            cs = self._choices.get(0)
            if cs is None:
                return None
            slot = cs.by_index.get(index)
            if slot is None:
                return None
            self._cache_slot = slot
            self._cache_cs = cs
            self._cache_choice = 0
            self._cache_index = index
        if not slot.nfrags:
            # Its first fragment goes the general way, which notes it in the adapter's state.
            return None
        cs.latest = slot
        return slot

    cdef int _append_item(self, const cs_val *item, const cs_val *arguments) except -1:
        """Append an argument string to the Responses call item_id names if the adapter has seen it; 0 if not."""
        cdef cs_span span
        cdef Slot slot = self._item(item)
        if slot is None:
            return 0
        if arguments.n:
            span = _span(arguments)
            self._append_span(slot, &span)
        return 1

    cdef int _append_known(self, int64_t index, const cs_val *arguments) except -1:
        """Append an argument string to choice 0's call at index if the adapter has seen it; 0 if not."""
        cdef cs_span span
        cdef Slot slot = self._known_slot(index)
        if slot is None:
            return 0
        if arguments.n:
            span = _span(arguments)
            self._append_span(slot, &span)
        return 1

    cdef int _fast_event(self, object event, const unsigned char *data, Py_ssize_t n) except -1:
        """Apply the commonest events of the other formats in place; 0 sends the event the general way.

        Each format's reader (_c/fast_*.pxi) does exactly what the format's adapter does with that event.
        """
        if self._fmt == FMT_ANTHROPIC:
            return _anthropic_fast(self, data, n)
        if self._fmt == FMT_RESPONSES:
            return _responses_fast(self, data, n)
        if self._fmt == FMT_BEDROCK:
            return _bedrock_fast(self, event, data, n)
        if self._fmt == FMT_COHERE:
            return _cohere_fast(self, data, n)
        if self._fmt == FMT_GEMINI:
            return _gemini_fast(self, data, n)
        if self._fmt == FMT_OLLAMA:
            return _ollama_line(self, data, n)
        return 0

    cdef int _raw_usage(self, const cs_val *v) except -1:
        """Keep a usage object as its JSON text (parsed once, when the result is built)."""
        usage = self._state.usage
        if type(usage) is RawJSON and len(<bytes>usage) == v.n and memcmp(<const char *><bytes>usage, v.p, v.n) == 0:
            return 0  # the same usage again, as Gemini sends with every chunk
        if cs_long_digit_run(v.p, v.n):  # a count beyond 64 bits, maybe: read exactly now (the rare case)
            self._state.usage = _loads_exact((<const char *>v.p)[:v.n])
            return 0
        self._state.usage = RawJSON((<const char *>v.p)[:v.n])
        return 0

    cdef int _complete_slot(self, Slot slot) except -1:
        """Hand over one call the protocol just closed (what complete() does for one slot)."""
        if slot.call is None:
            self._done.append(self._settle(slot, False))
        return 0

    cdef Slot _item(self, const cs_val *key):
        """Return the call a Responses item_id names, when it already has arguments, else None."""
        cdef Slot slot
        cdef object index
        cdef ChoiceState cs
        if (self._item_slot is not None and not key.has_esc and len(self._item_key) == key.n
                and memcmp(<const char *>self._item_key, key.p, key.n) == 0):
            slot = self._item_slot
        else:
            if key.has_esc:
                return None
            item = PyUnicode_DecodeUTF8(<const char *>key.p, key.n, NULL)
            index = self._state.keys.get(item)
            cs = self._choices.get(0)
            if index is None or cs is None or item not in self._state.notes.calls:
                return None
            slot = cs.by_index.get(index)
            if slot is None:
                return None
            self._item_key = (<const char *>key.p)[:key.n]
            self._item_slot = slot
        if not slot.nfrags:
            return None
        (<ChoiceState>self._choices[0]).latest = slot
        return slot

    cdef int _append_span(self, Slot slot, const cs_span *s) except -1:
        """Append a scanned argument string to its slot, as _append does for bytes."""
        cdef bytearray buf
        cdef Py_ssize_t size
        cdef Py_ssize_t n
        cdef bytes head
        if slot.over:
            if s.n:
                _past_cut(slot, s)
            return 0
        if slot.shared:
            _unshare(slot)
        buf = slot.buf
        size = PyByteArray_GET_SIZE(buf)
        if slot.pending:
            # The scanner passes no lone surrogate, so a pending one has no partner: keep its text.
            head = escape_surrogate(slot.pending).encode()
            slot.pending = 0
            buf.extend(head)
        _unescape_into(buf, s)
        if slot.nfrags == 0 or slot.cumulative is not None:
            # Rare: the first fragment, or cumulative tracking. Take the general route.
            data = bytes(buf[size:])
            PyByteArray_Resize(buf, size)
            self._append(slot, data)
            return 0
        n = PyByteArray_GET_SIZE(buf) - size
        if size + n > self._max_call or self._stream_over(n):
            head = bytes(buf[size:])
            PyByteArray_Resize(buf, size)
            self._cut(slot, _CUT_CALL_BYTES if size + n > self._max_call else _CUT_STREAM_BYTES)
            _follow_cut(slot, head)  # its structure read, as _append does
            return 0
        self._kept += n
        slot.last_start = size
        slot.nfrags += 1
        return 0

    cdef int _text_span(self, object number, int which, const cs_span *s) except -1:
        cdef Text t = self._text_buf(number, which)
        cdef Py_ssize_t size
        if t is None:
            return 0
        size = PyByteArray_GET_SIZE(t.buf)
        if t.pending:
            t.buf.extend(escape_surrogate(t.pending).encode())
            t.pending = 0
        _unescape_into(t.buf, s)
        if self._stream_over(PyByteArray_GET_SIZE(t.buf) - size):
            PyByteArray_Resize(t.buf, size)
            t.cut = True
            self._budget_spent(text_named(number, which))
            return 0
        self._kept += PyByteArray_GET_SIZE(t.buf) - size
        return 0

    # ---------------------------------------------------------------- chunks and fragments

    def feed_chunk(self, obj):
        """Feed one parsed chunk: a dict, JSON text, or an SDK object with model_dump().

        Return the calls this chunk completed, as feed() does.
        """
        if self._result is not None:
            raise finalized("feed_chunk")
        self._event_at = -1
        self._anth_open[0] = self._anth_open[1] = -1  # (the turn may change: as _dispatch_payload says)
        self._gem_logged = -1
        _handle_object(self, self._state, obj)
        if self._halting:
            self._ended_seen = self._state.ended
        if not self._done:
            return []
        done = self._done
        self._done = []
        return done

    cdef int _take_whole(self, object choice, object call_id, object name, object arguments,
                         bytes sent=None) except -1:
        """whole(), for a fast reader; sent: the arguments' text as it found it (no string), when it did."""
        cdef Slot slot
        cdef _SentArguments kept
        if sent is None or type(arguments) is not dict:
            self.whole(choice, call_id, name, arguments)
            return 0
        slot = self._route(choice, None, call_id, name, True)
        if slot is None:
            return 0  # over a limit: recorded, and the call dropped
        if (not slot.quirks and _GROWTH * len(sent) <= self._max_call
                and self._kept + self._lazy_bound + _GROWTH * len(sent) <= self._max_stream):
            # No limit can be reached by it: keep the text as sent, and re-encode it only if asked.
            slot.parsed = arguments
            slot.nfrags = 1
            kept = _SentArguments.__new__(_SentArguments)
            kept.text = sent
            slot.call = ToolCall(slot.id, slot.name, slot.choice, slot.position, arguments, kept)
            slot.call_nfrags = 1
            if self._lazy is None:
                self._lazy = []
            self._lazy.append(slot.call)
            self._lazy_bound += _GROWTH * len(sent)
            self._done.append(slot.call)
            return 0
        self._whole_value(slot, arguments, _compacted_text(sent))
        return 0

    # ---------------------------------------------------------------- what this twin adds to the slot rules

    cdef Slot _route(self, object choice, object index, object call_id, object name, bint whole):
        """SlotBook._route, forgetting the fast paths' cached slots: a new call may take an index's place."""
        self._cache_slot = None
        self._item_slot = None
        return SlotBook._route(self, choice, index, call_id, name, whole)

    cdef object _long_run(self, bytearray buf):
        """Scan buf for a digit run too long for a float, in C (make_call need not look again)."""
        return _buf_long_run(buf)


include "_c/fast_anthropic.pxi"
include "_c/fast_responses.pxi"
include "_c/fast_bedrock.pxi"
include "_c/fast_cohere.pxi"
include "_c/fast_gemini.pxi"
include "_c/fast_ollama.pxi"
