# Included by _accumulator_c.pyx after the Accumulator class: the Bedrock fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _bedrock_fast(Accumulator acc, object event, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Bedrock contentBlockDelta in place as _bedrock.handle does; 0 sends the event the general way."""
    cdef cs_val *v = acc._vals
    cdef cs_span span
    cdef object turn
    if event != "contentBlockDelta" or not cs_extract(data, n, _BEDROCK, 5, v) or v[0].kind != CS_T_INT:
        return 0
    if v[2].kind == CS_T_STR:
        return acc._append_known(v[0].i, &v[2])
    if (v[1].kind == CS_T_ABSENT or v[1].kind == CS_T_NULL) and v[3].kind == CS_T_STR \
            and v[4].kind == CS_T_ABSENT:
        # The turn notes where each block's text starts (_turns/bedrock.py), as the adapter does: the
        # first piece of a block's text makes it the one whose text is arriving.
        turn = acc._turn
        if turn is None:
            turn = acc._turn = acc._state.turn
            if turn is None:
                return 0  # no event has made the turn yet: the adapter makes it
        if turn.text_open != v[0].i:  # a Python compare: a mangled stream may have left a huge index there
            turn.attend(0, v[0].i, _anthropic_text_len(acc, 0))
        span = _span(&v[3])
        acc._text_span(0, 0, &span)
        return 1
    return 0
