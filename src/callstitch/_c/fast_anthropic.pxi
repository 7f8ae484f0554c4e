# Included by _accumulator_c.pyx after the Accumulator class: the Anthropic fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _anthropic_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply an Anthropic event in place as _anthropic.handle does; 0 sends it the general way."""
    cdef cs_val *v = acc._vals
    cdef cs_span span
    if not cs_extract(data, n, _ANTHROPIC, 6, v):
        return 0
    if _is(&v[0], "ping", 4):
        return 1  # the adapter lets it pass
    if not _is(&v[0], "content_block_delta", 19):
        return _anthropic_event(acc, data, n)
    if v[1].kind != CS_T_INT or v[2].kind != CS_T_STR:
        return 0
    if _is(&v[2], "input_json_delta", 16) and v[3].kind == CS_T_STR:
        return acc._append_known(v[1].i, &v[3])
    if _is(&v[2], "text_delta", 10) and v[4].kind == CS_T_STR:
        span = _span(&v[4])
        acc._text_span(0, 0, &span)
        return 1
    if _is(&v[2], "thinking_delta", 14) and v[5].kind == CS_T_STR:
        span = _span(&v[5])
        acc._text_span(0, 1, &span)
        return 1
    if not (_is(&v[2], "input_json_delta", 16) or _is(&v[2], "text_delta", 10)
            or _is(&v[2], "thinking_delta", 14)):
        return 1  # signature, citations …: the adapter lets them pass
    return 0


cdef int _anthropic_event(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a block start or stop, or a message start, delta or stop, as _anthropic.handle does; 0: the general way."""
    cdef cs_val *v = acc._vals
    cdef cs_span span
    cdef int which
    if not cs_extract(data, n, _ANTHROPIC_OTHER, 12, v) or v[0].kind != CS_T_STR or v[0].has_esc:
        return 0
    state = acc._state
    if _is(&v[0], "content_block_stop", 18):
        if v[1].kind != CS_T_INT:
            return 0
        _anthropic.stop_block(acc, state, v[1].i)
        return 1
    if _is(&v[0], "content_block_start", 19):
        if v[1].kind != CS_T_INT or not _is_object(&v[2]) or v[3].has_esc:
            return 0
        if _is(&v[3], "tool_use", 8):
            _anthropic.start_tool(acc, state, v[1].i, _value(&v[4]), _value(&v[5]), _value(&v[6]))
        elif _is(&v[3], "text", 4) or _is(&v[3], "thinking", 8):
            which = 0 if v[3].n == 4 else 1
            if v[7 + which].kind == CS_T_STR:
                if v[7 + which].n:
                    span = _span(&v[7 + which])
                    acc._text_span(0, which, &span)
            elif not (v[7 + which].kind & (CS_T_ABSENT | CS_T_NULL)):
                return 0  # text that is not a string: the adapter reports it
        return 1
    if _is(&v[0], "message_delta", 13):
        if v[9].kind == CS_T_STR:
            state.finish(0, _span_str_v(&v[9]))
        if _is_object(&v[10]):
            _anthropic.merge_usage(state, _value(&v[10]))
        return 1
    if _is(&v[0], "message_start", 13):
        if _is_object(&v[11]):
            _anthropic.merge_usage(state, _value(&v[11]))
        return 1
    if _is(&v[0], "message_stop", 12):
        state.complete = True
        acc._complete_all()
        return 1
    return 0
