# Included by _accumulator_c.pyx: writing scanned strings into slots and texts (their classes are
# in _slots.py, shared with the pure twin), and a whole call's arguments kept as sent.

cdef class _SentArguments:
    """A whole call's arguments as the stream sent them: ToolCall.raw_arguments re-encodes them when asked."""
    cdef readonly bytes text

    def compact(self):
        """Return the arguments as orjson writes their value: the compact text every call keeps."""
        if self.text is None:
            raise TypeError("no arguments text: only the accumulator makes these")
        data = _compacted_text(self.text)
        return compact_json(_loads_exact(self.text)) if data is None else data


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


cdef int _past_cut(Slot slot, const cs_span *s) except -1:
    """Follow a piece past a call's cut as _append does: its bytes (a pending surrogate's escape first) read, not kept."""
    slot.call_nfrags = -1  # a piece past the cut: a call built before it is built again, as cut
    dropped = bytearray(escape_surrogate(slot.pending).encode() if slot.pending else b"")
    slot.pending = 0
    _unescape_into(dropped, s)
    _follow_cut(slot, bytes(dropped))
    return 0
