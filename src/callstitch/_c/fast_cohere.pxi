# Included by _accumulator_c.pyx after the Accumulator class: the Cohere fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef bint _has_logprobs(const unsigned char *data, Py_ssize_t n):
    """Tell whether an event holds the key "logprobs" (or a string that is it: then the general path decides)."""
    cdef const unsigned char *p = data
    cdef const unsigned char *e = data + n
    while True:
        p = <const unsigned char *>memchr(p, 34, e - p)  # '"'
        if p == NULL or e - p < 10:
            return False
        if cs_same(p + 1, "logprobs\"", 9):
            return True
        p += 1


cdef int _cohere_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Cohere event in place as _cohere.handle does; 0 sends it the general way."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef cs_span span
    if _cohere_delta(data, n, &v[1], &v[4]):
        _paths[PATH_COHERE_DELTA] += 1
        return acc._append_known(v[1].i, &v[4])
    if not cs_extract(data, n, _COHERE, 8, v) or v[0].kind != CS_T_STR or v[0].has_esc:
        return 0
    if (<const char *>v[0].p)[:v[0].n] in _COHERE_IGNORED:
        return 1  # the adapter lets these pass
    # A content-delta with logprobs goes the general way: the turn keeps them (found by their name,
    # which the text cannot hold unescaped; a false alarm only costs the general path).
    if _is(&v[0], "content-delta", 13) and v[5].kind == CS_T_STR and v[7].kind == CS_T_ABSENT \
            and not _has_logprobs(data, n):
        span = _span(&v[5])
        acc._text_span(0, 0, &span)
        return 1
    if _is(&v[0], "tool-call-delta", 15):
        if v[1].kind != CS_T_INT or v[4].kind != CS_T_STR or not (v[2].kind & (CS_T_ABSENT | CS_T_NULL)) \
                or not (v[3].kind & (CS_T_ABSENT | CS_T_NULL)):
            return 0
        return acc._append_known(v[1].i, &v[4])
    if _is(&v[0], "tool-plan-delta", 15) and v[6].kind == CS_T_STR:
        span = _span(&v[6])
        acc._text_span(0, 1, &span)
        return 1
    return 0


cdef bint _cohere_delta(const unsigned char *data, Py_ssize_t n, cs_val *index, cs_val *arguments):
    """Read the commonest event, a call's next arguments piece, laid out as Cohere sends it; False if it is not that.

    {"type":"tool-call-delta","index":N,"delta":{"message":{"tool_calls":{"function":{"arguments":"…"}}}}}
    with no space: read byte by byte, the string by the extractor's own reader. Any other layout
    is left to cs_extract.
    """
    cdef const unsigned char *e = data + n
    cdef const unsigned char *p = _literal(data, e, b'{"type":"tool-call-delta","index":')
    cdef const unsigned char *q = _digits(p, e)
    cdef int esc = 0
    cdef int64_t number = 0
    if q == NULL:
        return False
    while p < q:
        number = number * 10 + (p[0] - 48)
        p += 1
    p = _literal(q, e, b',"delta":{"message":{"tool_calls":{"function":{"arguments":"')
    if p == NULL:
        return False
    q = cs_str(p, e, &esc)
    if q == NULL or _literal(q, e, b'"}}}}}') != e:
        return False
    index.kind, index.i = CS_T_INT, number
    arguments.kind, arguments.p, arguments.n, arguments.has_esc = CS_T_STR, p, q - p, esc
    return True
