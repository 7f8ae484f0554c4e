# Included by _accumulator_c.pyx after the Accumulator class: the OpenAI Responses fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


_ResponsesTurn = _responses.ResponsesTurn


cdef object _responses_turn(Accumulator acc):
    """Return the stream's turn record (as _responses.keep_turn does), made on first use."""
    turn = acc._state.turn
    if turn is None:
        turn = acc._state.turn = _ResponsesTurn()
    return turn


cdef int _responses_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply an OpenAI Responses event in place as _responses.handle does; 0 sends it the general way."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef Slot slot
    if _responses_delta(data, n, &v[1], &v[2]):
        _paths[PATH_RESPONSES_DELTA] += 1
        return acc._append_item(&v[1], &v[2])
    if not cs_extract(data, n, _RESPONSES, 3, v) or v[0].kind != CS_T_STR or v[0].has_esc:
        return 0
    if v[2].kind == CS_T_STR and (_is(&v[0], "response.function_call_arguments.delta", 38) or _is(
            &v[0], "response.custom_tool_call_input.delta", 37)):
        if v[1].kind != CS_T_STR:
            return 0
        return acc._append_item(&v[1], &v[2])
    if v[0].n > 9 and cs_same(v[0].p, b"response.", 9) and \
            (<const char *>v[0].p)[:v[0].n] not in _RESPONSES_HANDLED:
        return 1  # text done events, annotations …: the adapter lets them pass
    if _responses_kept(acc, v, data, n):
        return 1
    if (_is(&v[0], "response.function_call_arguments.done", 37) or _is(&v[0], "response.output_item.done", 25)
            or _is(&v[0], "response.output_item.added", 26) or _is(&v[0], "response.completed", 18)
            or _is(&v[0], "response.incomplete", 19)) and not cs_extract(data, n, _RESPONSES_END, 12, v):
        return 0
    if _is(&v[0], "response.function_call_arguments.done", 37):
        # Its arguments repeat what the deltas brought: the call is complete.
        slot = acc._item(&v[1]) if v[1].kind == CS_T_STR else None
        if slot is None:
            return 0
        acc._complete_slot(slot)
        return 1
    if _is(&v[0], "response.output_item.done", 25) or _is(&v[0], "response.output_item.added", 26):
        return _responses_item(acc, v, data, n)
    if _is(&v[0], "response.completed", 18) or _is(&v[0], "response.incomplete", 19):
        return _responses_end(acc, v, data, n)
    return _responses_text(acc, v)


cdef inline bint _responses_kept(Accumulator acc, const cs_val *v, const unsigned char *data,
                                 Py_ssize_t n) except -1:
    """Keep a lifecycle or content-part event in the turn, as sent; False when the event is neither."""
    if _is(&v[0], "response.created", 16) or _is(&v[0], "response.in_progress", 20) or _is(
            &v[0], "response.queued", 15):
        # The turn keeps the last lifecycle event as sent, read only if no end event comes.
        _responses_turn(acc).lifecycle = PyBytes_FromStringAndSize(<const char *>data, n)
        return True
    if _is(&v[0], "response.content_part.added", 27) or _is(&v[0], "response.content_part.done", 26) or _is(
            &v[0], "response.reasoning_summary_part.added", 37) or _is(
            &v[0], "response.reasoning_summary_part.done", 36):
        # Where a part's text starts or ends in the choice's text: the turn keeps the event as sent.
        acc._state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
        _responses_turn(acc).part(acc, PyBytes_FromStringAndSize(<const char *>data, n))
        return True
    return False


cdef int _responses_item(Accumulator acc, const cs_val *v, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply response.output_item.added / .done; 0 sends it the general way."""
    cdef Slot slot
    cdef object turn
    if _is(&v[3], "custom_tool_call", 16):
        return 0  # a custom (free-form) tool call: the general way
    if not _is(&v[3], "function_call", 13):
        if v[3].kind == CS_T_STR and v[3].has_esc:
            return 0  # an escaped type is read the general way
        # A message, reasoning, a server tool: no call; the turn keeps the event as sent.
        turn = _responses_turn(acc)
        acc._state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
        if v[0].n == 25:
            turn.item_done(acc, PyBytes_FromStringAndSize(<const char *>data, n))
        else:
            turn.item_added(acc, PyBytes_FromStringAndSize(<const char *>data, n), None)
        return 1
    if v[0].n != 25 or v[4].kind != CS_T_STR or v[4].n == 0:
        return 0  # registering a call: the general way
    slot = acc._item(&v[4])
    if slot is None or slot.id is None or slot.name is None:
        return 0  # (a call still without its id or name: the general way takes them from the done item)
    acc._complete_slot(slot)
    # The done item, as the adapter keeps it: read only if the turn is asked for and no end event has it.
    acc._state.event_size = n  # (what _dispatch.handle_event notes of every event it is given)
    _responses_turn(acc).item_done(acc, PyBytes_FromStringAndSize(<const char *>data, n))
    return 1


cdef inline int _responses_text(Accumulator acc, const cs_val *v) except -1:
    """Add a text, reasoning or refusal delta to choice 0's text; 0 sends any other event the general way."""
    cdef cs_span span
    if v[2].kind != CS_T_STR:
        return 0
    span = _span(&v[2])
    if _is(&v[0], "response.output_text.delta", 26):
        acc._text_span(0, 0, &span)
    elif _is(&v[0], "response.reasoning_summary_text.delta", 37) or _is(
            &v[0], "response.reasoning_text.delta", 29):
        acc._text_span(0, 1, &span)
    elif _is(&v[0], "response.refusal.delta", 22):
        acc._text_span(0, 2, &span)
    else:
        return 0
    return 1


cdef int _responses_end(Accumulator acc, cs_val *v, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply response.completed / .incomplete without reading the response's output (the turn keeps it as sent)."""
    cdef object reason
    if v[10].kind != CS_T_OTHER or not (v[8].kind & (CS_T_ABSENT | CS_T_NULL)) or v[5].kind == CS_T_STR \
            or not (v[6].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_STR)):
        return 0
    if v[5].kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY):
        acc._raw_usage(&v[5])
    if v[9].kind == CS_T_OTHER and v[7].kind == CS_T_STR:
        reason = _span_str_v(&v[7])
    elif v[6].kind == CS_T_STR and v[6].n:
        reason = _span_str_v(&v[6])
    else:
        reason = "completed" if v[0].n == 18 else "incomplete"
    _responses_turn(acc).end(PyBytes_FromStringAndSize(<const char *>data, n),
                             not (v[11].kind & (CS_T_ABSENT | CS_T_NULL)))
    acc.choice_finished(0, reason)
    acc._complete_all()
    return 1


cdef bint _responses_delta(const unsigned char *data, Py_ssize_t n, cs_val *item, cs_val *delta):
    """Read the commonest event, a call's next arguments piece, laid out as OpenAI sends it; False if it is not that.

    {"type":"response.function_call_arguments.delta","sequence_number":N,"item_id":"…",
    "output_index":N,"delta":"…"} with an "obfuscation" string or not, no space anywhere: read
    byte by byte, each string by the extractor's own reader. Anything else (other keys, another
    order, spaces, an escaped item_id) is left to cs_extract, which reads every layout.
    """
    cdef const unsigned char *p = data
    cdef const unsigned char *e = data + n
    cdef const unsigned char *q
    cdef int esc = 0
    p = _literal(p, e, b'{"type":"response.function_call_arguments.delta","sequence_number":')
    p = _literal(_digits(p, e), e, b',"item_id":"')
    if p == NULL:
        return False
    q = cs_str(p, e, &esc)
    if q == NULL or esc:
        return False
    item.kind, item.p, item.n, item.has_esc = CS_T_STR, p, q - p, 0
    p = _literal(_digits(_literal(q + 1, e, b',"output_index":'), e), e, b',"delta":"')
    if p == NULL:
        return False
    q = cs_str(p, e, &esc)
    if q == NULL:
        return False
    delta.kind, delta.p, delta.n, delta.has_esc = CS_T_STR, p, q - p, esc
    if e - q == 2:
        return q[1] == b'}'
    p = _literal(q + 1, e, b',"obfuscation":"')
    if p == NULL:
        return False
    q = cs_str(p, e, &esc)
    return q != NULL and e - q == 2 and q[1] == b'}'
