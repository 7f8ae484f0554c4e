# Included by _accumulator_c.pyx: a call's slot, a choice's slots, a text's buffer, and writing
# scanned strings into them.

cdef class _SentArguments:
    """A whole call's arguments as the stream sent them: ToolCall.raw_arguments re-encodes them when asked."""
    cdef readonly bytes text

    def compact(self):
        """Return the arguments as orjson writes their value: the compact text every call keeps."""
        if self.text is None:
            raise TypeError("no arguments text: only the accumulator makes these")
        data = _compacted_text(self.text)
        return compact_json(_loads_exact(self.text)) if data is None else data


cdef class _Slot:
    """One call being received: id, name and its argument bytes."""
    cdef object choice
    cdef Py_ssize_t seq
    cdef Py_ssize_t position
    cdef object id
    cdef object name
    cdef bytearray buf
    cdef Py_ssize_t last_start
    cdef Py_ssize_t nfrags
    cdef object cumulative
    cdef int pending
    cdef int quirks
    cdef object call  # built when the protocol closed the call
    cdef Py_ssize_t call_nfrags
    cdef int over  # the limit (a CUT_* code) its arguments reached: the rest is dropped
    cdef bint shared  # a call handed over holds buf: copy it before it changes (_unshare)
    cdef object parsed  # the arguments as a value, when the call arrived whole with them parsed
    cdef bint custom  # an OpenAI custom tool call: its input text is the arguments, never parsed
    cdef bint late  # first seen after a dropped event (Limits.event_bytes), which may have held its start

    def __cinit__(self):
        self.buf = PyByteArray_FromStringAndSize(NULL, 0)  # the other fields start as None and 0


cdef class _ChoiceState:
    """The calls of one choice: by index, and the latest one."""
    cdef dict by_index
    cdef _Slot latest
    cdef Py_ssize_t count

    def __cinit__(self):
        self.by_index = {}
        self.latest = None


cdef class _Text:
    """A choice's message text (content, reasoning, refusal) being received."""
    cdef bytearray buf
    cdef int pending
    cdef bint cut  # Limits.stream_bytes cut it: text after the cut would leave a hole

    def __cinit__(self):
        self.buf = bytearray()


cdef inline int _grow(bytearray buf, Py_ssize_t extra) except -1:
    return PyByteArray_Resize(buf, PyByteArray_GET_SIZE(buf) + extra)


cdef Py_ssize_t _unescape_into(bytearray buf, const cs_span *s) except -1:
    """Append a scanned string span to buf (escapes decoded); return the bytes written."""
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
    cdef Py_ssize_t n
    if not s.has_esc:
        _grow(buf, s.n)
        memcpy(PyByteArray_AS_STRING(buf) + size, s.p, s.n)
        return s.n
    _grow(buf, s.n)
    n = cs_unescape(s.p, s.n, <unsigned char *>PyByteArray_AS_STRING(buf) + size)
    PyByteArray_Resize(buf, size + n)
    return n


cdef object _span_str(const cs_span *s):
    """Return a scanned string span as a str (None when absent or null)."""
    cdef bytearray tmp
    if s.kind != CS_STR:
        return None
    if not s.has_esc:
        return PyUnicode_DecodeUTF8(<const char *>s.p, s.n, NULL)
    tmp = bytearray()
    _unescape_into(tmp, s)
    return PyUnicode_DecodeUTF8(PyByteArray_AS_STRING(tmp), PyByteArray_GET_SIZE(tmp), NULL)
