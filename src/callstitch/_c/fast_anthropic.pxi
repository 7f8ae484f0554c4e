# Included by _accumulator_c.pyx after the Accumulator class: the Anthropic fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _anthropic_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply an Anthropic event in place as _anthropic.handle does; 0 sends it the general way."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef cs_span span
    cdef int kind = _anthropic_delta(data, n, &v[1], &v[3])
    if kind:
        _paths[PATH_ANTHROPIC_DELTA] += 1
        if kind == 1:
            return acc._append_known(v[1].i, &v[3])
        if v[1].i != acc._anth_open[0]:
            return 0  # (as below: text for a block other than the open one changes the turn's spans)
        span = _span(&v[3])
        acc._text_span(0, 0, &span)
        return 1
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
    # Text and thinking in place only for the block whose text is arriving (the turn's open block,
    # as this path last saw it start): a delta for any other block changes the turn's spans.
    if _is(&v[2], "text_delta", 10) and v[4].kind == CS_T_STR and v[1].i == acc._anth_open[0]:
        span = _span(&v[4])
        acc._text_span(0, 0, &span)
        return 1
    if _is(&v[2], "thinking_delta", 14) and v[5].kind == CS_T_STR and v[1].i == acc._anth_open[1]:
        span = _span(&v[5])
        acc._text_span(0, 1, &span)
        return 1
    if not (_is(&v[2], "input_json_delta", 16) or _is(&v[2], "text_delta", 10)
            or _is(&v[2], "thinking_delta", 14) or _is(&v[2], "signature_delta", 15)
            or _is(&v[2], "citations_delta", 15)):
        return 1  # a delta type the adapter (and the SDK) lets pass
    return 0


cdef int _anthropic_delta(const unsigned char *data, Py_ssize_t n, cs_val *index, cs_val *text):
    """Read the commonest events, a block's next piece, laid out as Anthropic sends them; 0 if it is not one.

    {"type":"content_block_delta","index":N,"delta":{"type":"input_json_delta","partial_json":"…"}}
    (1) or the same with "text_delta" and "text" (2), no space: read byte by byte, the string by
    the extractor's own reader. Any other layout is left to cs_extract.
    """
    cdef const unsigned char *e = data + n
    cdef const unsigned char *p = _literal(data, e, b'{"type":"content_block_delta","index":')
    cdef const unsigned char *q = _digits(p, e)
    cdef const unsigned char *r
    cdef int esc = 0, kind = 1
    cdef int64_t number = 0
    if q == NULL:
        return 0
    while p < q:
        number = number * 10 + (p[0] - 48)
        p += 1
    p = _literal(q, e, b',"delta":{"type":"')
    r = _literal(p, e, b'input_json_delta","partial_json":"')
    if r == NULL:
        r = _literal(p, e, b'text_delta","text":"')
        kind = 2
    if r == NULL:
        return 0
    q = cs_str(r, e, &esc)
    if q == NULL or _literal(q, e, b'"}}') != e:
        return 0
    index.kind, index.i = CS_T_INT, number
    text.kind, text.p, text.n, text.has_esc = CS_T_STR, r, q - r, esc
    return kind


cdef int _anthropic_event(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a block start or stop, or a message start, delta or stop, as _anthropic.handle does; 0: the general way."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef cs_val usage[1]
    cdef int64_t index
    if not cs_extract(data, n, _ANTHROPIC_OTHER, 12, v) or v[0].kind != CS_T_STR or v[0].has_esc:
        return 0
    state = acc._state
    if _is(&v[0], "content_block_stop", 18):
        if v[1].kind != CS_T_INT:
            return 0
        index = v[1].i
        _anthropic_turn(state).log.append((index, _anthropic_text_len(acc, 0), _anthropic_text_len(acc, 1)))
        _anthropic.stop_block(acc, state, index)
        if acc._anth_open[0] == index:
            acc._anth_open[0] = -1
        if acc._anth_open[1] == index:
            acc._anth_open[1] = -1
        return 1
    if _is(&v[0], "content_block_start", 19):
        if v[1].kind != CS_T_INT or not _is_object(&v[2]) or v[3].has_esc:
            return 0
        return _anthropic_start(acc, state, v, data, n)
    if _is(&v[0], "message_delta", 13):
        if v[9].kind == CS_T_STR:
            acc.choice_finished(0, _span_str_v(&v[9]))
        # The turn reads the delta from the event's text when it is asked for (a non-object delta then reads as none)
        state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
        _anthropic.note_delta(acc, state, PyBytes_FromStringAndSize(<const char *>data, n))
        if _is_object(&v[10]):
            _anthropic.merge_usage(state, _value(&v[10]))
        return 1
    if _is(&v[0], "message_start", 13):
        if not _is_object(&v[11]) or not cs_extract(v[11].p, v[11].n, _ANTHROPIC_USAGE, 1, usage):
            return 0  # the adapter keeps nothing of it, or reads it the general way
        # The turn keeps the message as its JSON text, read when the turn is asked for; the usage counts now.
        _anthropic.message_start(state, (<const char *>v[11].p)[:v[11].n], _value(&usage[0]))
        return 1
    if _is(&v[0], "message_stop", 12):
        state.complete = True
        acc._complete_all()
        return 1
    return 0


cdef int _anthropic_start(Accumulator acc, object state, const cs_val *v, const unsigned char *data,
                          Py_ssize_t n) except -1:
    """Apply a content_block_start as _anthropic.start_block does; 0: the general way.

    v: what _anthropic_event's extractor found in it (_ANTHROPIC_OTHER). The turn keeps the block's
    start object as its event's JSON text (parsed when the turn is read).
    """
    cdef int64_t index = v[1].i
    cdef cs_span span
    cdef int which = -1
    if _is(&v[3], "text", 4):
        which = 0
    elif _is(&v[3], "thinking", 8):
        which = 1
    if which >= 0 and not (v[7 + which].kind & (CS_T_STR | CS_T_ABSENT | CS_T_NULL)):
        return 0  # text that is not a string: the adapter reports it
    if which < 0 and v[6].kind == CS_T_ABSENT and not _is(&v[3], "tool_use", 8):
        return 0  # a block kept as sent (a tool result …): the adapter counts it against the turn's budget
    call = None
    if _is(&v[3], "tool_use", 8):
        call = _anthropic.start_tool(acc, state, index, _value(&v[4]), _value(&v[5]), _value(&v[6]))
    state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
    turn = _anthropic_turn(state)
    start = PyBytes_FromStringAndSize(<const char *>data, n)
    # _anthropic.note_start, in place for a block it lists (a client call let in, or another block
    # within the turn's budget: a Python call per block costs this path 4%); it does the rest
    if call or (call is None and not turn.cut and acc.keep_own(None)):
        listed = True
        turn.log.append((index, start, which, _anthropic_text_len(acc, which) if which >= 0 else 0))
    else:
        listed = _anthropic.note_start(acc, state, index, start, which, call)
    # The block at index is a new one: deltas at index are its, and of its kind only.
    if acc._anth_open[0] == index:
        acc._anth_open[0] = -1
    if acc._anth_open[1] == index:
        acc._anth_open[1] = -1
    if not listed and call is None:  # past the turn's budget no text is in a block: the adapter takes every delta
        acc._anth_open[0] = acc._anth_open[1] = -1
    if which >= 0:
        if listed:
            acc._anth_open[which] = index
        if v[7 + which].kind == CS_T_STR and v[7 + which].n:
            span = _span(&v[7 + which])
            acc._text_span(0, which, &span)
    return 1


cdef Py_ssize_t _anthropic_text_len(Accumulator acc, int which) except -1:
    """Return acc.text_length(0, which) without a Python call."""
    cdef list texts = acc._texts.get(0)
    if texts is None or texts[which] is None:
        return 0
    return len((<Text>texts[which]).buf)


cdef object _anthropic_turn(object state):
    """Return the stream's turn record (_anthropic.turn_of), made on first use."""
    turn = state.turn
    if turn is None:
        turn = _anthropic.turn_of(state)
    return turn
