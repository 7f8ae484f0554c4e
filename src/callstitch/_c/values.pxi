# Included by _accumulator_c.pyx: reading a value the scanner located (as the adapters would see
# it after orjson.loads), and its compact text.

cdef inline bint _is(const cs_val *v, const char *text, Py_ssize_t n):
    """Tell whether a located value is the string text (compared as sent: escapes never match)."""
    return v.kind == CS_T_STR and v.n == n and not v.has_esc and cs_same(v.p, text, n)


cdef object _span_str_v(const cs_val *v):
    cdef cs_span s = _span(v)
    return _span_str(&s)


cdef object _loads_exact(bytes text):
    """Return _exactjson.loads_exact(text): orjson's reading, read again only when C finds a long digit run."""
    try:
        value = _loads(text)
    except JSONDecodeError:
        return _loads_exact_py(text)  # orjson's refusal: the rule is loads_exact's (past_double), read again
    if cs_long_digit_run(<const unsigned char *><char *>text, len(text)):
        return _exact(text, value)
    return value


cdef inline bint _buf_long_run(bytearray buf):
    """Tell whether a slot's bytes hold a long digit run (as _exactjson.long_digit_run, in C)."""
    return cs_long_digit_run(<const unsigned char *>PyByteArray_AS_STRING(buf), PyByteArray_GET_SIZE(buf))


cdef object _value(const cs_val *v):
    """Return a located value as the Python object loads_exact would give for it (None when absent)."""
    if v.kind == CS_T_STR:
        return _span_str_v(v)
    if v.kind == CS_T_INT:
        return v.i
    if v.kind == CS_T_OTHER or v.kind == CS_T_ARRAY:
        return _loads_exact((<const char *>v.p)[:v.n])
    return None


cdef object _compacted(const cs_val *v):
    """Return a located value's text as orjson.dumps writes its parsed value, or None when that takes dumps."""
    cdef unsigned char small[2048]
    cdef unsigned char *out = small
    cdef Py_ssize_t n
    if v.kind != CS_T_OTHER and v.kind != CS_T_ARRAY and v.kind != CS_T_INT:
        return None
    if v.n > 2048:
        out = <unsigned char *>PyMem_Malloc(v.n)
        if out == NULL:
            raise MemoryError()
    try:
        n = cs_compact(v.p, v.n, out)
        return PyBytes_FromStringAndSize(<const char *>out, n) if n >= 0 else None
    finally:
        if out != small:
            PyMem_Free(out)


cdef object _compacted_text(bytes text):
    """Return _compacted for the text of a JSON value other than a string (valid: orjson has read it)."""
    cdef cs_val v
    v.p = <const unsigned char *><char *>text
    v.n = len(text)
    v.kind = CS_T_OTHER
    v.has_esc = 0
    return _compacted(&v)


def _compact(bytes text):
    """Return what _compacted gives for a JSON value's text (for tests), or None; ValueError if it is not valid."""
    cdef cs_want want
    cdef cs_val v
    wrapped = b'{"v":' + text + b'}'
    _want(&want, "v")
    if not cs_extract(<const unsigned char *><char *>wrapped, len(wrapped), &want, 1, &v):
        raise ValueError("not a value the reader takes")
    return _compacted(&v)


def _long_run(bytes text):
    """Return what the C scan (cs_long_digit_run) tells of text (for tests: it must agree with _exactjson)."""
    return cs_long_digit_run(<const unsigned char *><char *>text, len(text))


cdef inline bint _is_true(const cs_val *v):
    return v.kind == CS_T_OTHER and v.n == 4 and cs_same(v.p, b"true", 4)


cdef inline bint _is_object(const cs_val *v):
    return v.kind == CS_T_OTHER and v.p[0] == b'{'


cdef inline bint _empty_object(const cs_val *v):
    """Tell whether a located object is {} (whitespace aside)."""
    cdef Py_ssize_t k
    for k in range(1, v.n - 1):
        if v.p[k] != b' ' and v.p[k] != b'\t' and v.p[k] != b'\r' and v.p[k] != b'\n':
            return False
    return True


cdef inline cs_span _span(const cs_val *v) noexcept:
    cdef cs_span s
    s.p = v.p
    s.n = v.n
    s.kind = CS_STR
    s.has_esc = v.has_esc
    return s


# Reading a known layout byte by byte (the fast readers of one exact event shape).

cdef inline const unsigned char *_literal(const unsigned char *p, const unsigned char *e, const char *text):
    """Return the end of text if the bytes at p are it, else NULL (p NULL: NULL)."""
    cdef Py_ssize_t size = strlen(text)  # (a literal's length: folded by the compiler once inlined)
    if p == NULL or e - p < size or memcmp(p, text, size) != 0:
        return NULL
    return p + size


cdef inline const unsigned char *_digits(const unsigned char *p, const unsigned char *e):
    """Return the end of a JSON integer of 1 to 18 digits at p (no sign, no leading zero), else NULL."""
    cdef const unsigned char *start = p
    if p == NULL:
        return NULL
    while p < e and b'0' <= p[0] <= b'9' and p - start < 19:
        p += 1
    if p == start or p - start > 18 or (start[0] == b'0' and p - start > 1):
        return NULL
    return p
