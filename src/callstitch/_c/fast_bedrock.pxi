# Included by _accumulator_c.pyx after the Accumulator class: the Bedrock fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _bedrock_fast(Accumulator acc, object event, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Bedrock contentBlockDelta in place as _bedrock.handle does; 0 sends the event the general way."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef int kind
    if event != "contentBlockDelta":
        return 0
    kind = _bedrock_delta(data, n, &v[0], &v[2])
    if kind:
        _paths[PATH_BEDROCK_DELTA] += 1
        return acc._append_known(v[0].i, &v[2]) if kind == 1 else _bedrock_text(acc, &v[0], &v[2], n)
    if not cs_extract(data, n, _BEDROCK, 5, v) or v[0].kind != CS_T_INT:
        return 0
    if v[2].kind == CS_T_STR:
        return acc._append_known(v[0].i, &v[2])
    if (v[1].kind == CS_T_ABSENT or v[1].kind == CS_T_NULL) and v[3].kind == CS_T_STR \
            and v[4].kind == CS_T_ABSENT:
        return _bedrock_text(acc, &v[0], &v[3], n)
    return 0


cdef int _bedrock_text(Accumulator acc, const cs_val *index, const cs_val *text, Py_ssize_t n) except -1:
    """Apply a block's next piece of text as the adapter does; 0 while no event has made the turn."""
    cdef cs_span span
    cdef object turn
    # The turn notes where each block's text starts (_turns/bedrock.py), as the adapter does: the
    # first piece of a block's text makes it the one whose text is arriving.
    turn = acc._turn
    if turn is None:
        turn = acc._turn = acc._state.turn
        if turn is None:
            return 0  # no event has made the turn yet: the adapter makes it
    if turn.text_open != index.i:  # a Python compare: a mangled stream may have left a huge index there
        acc._state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
        turn.text_at(acc, None, 0, index.i, _anthropic_text_len(acc, 0))
    span = _span(text)
    acc._text_span(0, 0, &span)
    return 1


cdef int _bedrock_delta(const unsigned char *data, Py_ssize_t n, cs_val *index, cs_val *piece):
    """Read the commonest event, a block's next piece, laid out as Bedrock sends it; 0 if it is not one.

    {"contentBlockIndex":N,"delta":{"toolUse":{"input":"…"}}[,"p":"…"]} (1) or
    {"contentBlockIndex":N,"delta":{"text":"…"}[,"p":"…"]} (2), no space ("p" is the padding
    Bedrock adds): read byte by byte, each string by the extractor's own reader. Any other layout
    is left to cs_extract.
    """
    cdef const unsigned char *e = data + n
    cdef const unsigned char *p = _literal(data, e, b'{"contentBlockIndex":')
    cdef const unsigned char *q = _digits(p, e)
    cdef const unsigned char *r
    cdef int esc = 0, kind = 1
    cdef int64_t number = 0
    if q == NULL:
        return 0
    while p < q:
        number = number * 10 + (p[0] - 48)
        p += 1
    p = _literal(q, e, b',"delta":{"')
    r = _literal(p, e, b'toolUse":{"input":"')
    if r == NULL:
        r = _literal(p, e, b'text":"')
        kind = 2
    if r == NULL:
        return 0
    q = cs_str(r, e, &esc)
    if q == NULL:
        return 0
    index.kind, index.i = CS_T_INT, number
    piece.kind, piece.p, piece.n, piece.has_esc = CS_T_STR, r, q - r, esc
    p = _literal(q, e, b'"}}' if kind == 1 else b'"}')
    if p != NULL and e - p == 1:
        return kind if p[0] == b'}' else 0
    p = _literal(p, e, b',"p":"')
    if p == NULL:
        return 0
    q = cs_str(p, e, &esc)
    return kind if q != NULL and e - q == 2 and q[1] == b'}' else 0
