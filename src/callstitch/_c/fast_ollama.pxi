# Included by _accumulator_c.pyx after the Accumulator class: the Ollama fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _ollama_line(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply an Ollama line in the shape its server writes, as _ollama.handle does; 0 sends it the general way."""
    cdef cs_oline line
    cdef cs_ocall calls[16]
    cdef int count = cs_ollama_line(data, n, &line, calls, 16)
    cdef int k
    if count < 0:
        return 0
    sent = [] if count else None  # most lines carry text only
    values = [] if count else None
    for k in range(count):
        sent.append((<const char *>calls[k].args)[:calls[k].args_n])
        try:
            value = _loads(sent[k])
        except ValueError:
            return 0  # the general path reports it (or reads a lone surrogate escape its own way)
        # loads_exact's reading: the scanner has measured the digit runs that matter (outside strings)
        values.append(_exact(sent[k], value) if calls[k].long_run else value)
    # The line's part of the turn, as _ollama.handle keeps it: the record of _turns/ollama.py (a list:
    # first line, last line, per call its function.index, logprobs), lines kept as JSON text, parsed
    # only when the turn is asked for.
    if acc._turn is None:
        acc._turn = acc._state.turn
        if acc._turn is None:
            acc._turn = acc._state.turn = [_ollama_head(data, line.head_n), None, [], None]
    if line.done:
        (<list>acc._turn)[1] = (<const char *>data)[:n]
    if line.content.n:
        acc._text_span(0, 0, &line.content)
    if line.thinking.n:
        acc._text_span(0, 1, &line.thinking)
    if count:  # (what _dispatch.handle_event notes of every event it is given: the turn counts the line once)
        acc._state.event_size = n
        turn_calls = (<list>acc._turn)[2]
    for k in range(count):
        taken = len(acc._slots)
        acc._take_whole(0, _span_str(&calls[k].id), _span_str(&calls[k].name), values[k], sent[k])
        # function.index, the one thing besides id, name and arguments a call in this shape can hold:
        # kept as _turns.ollama.note_call keeps a call's extras; in place when they cost nothing (an
        # integer, or none: not counted), for a call taken (a slot more: Limits.calls let it in)
        index = None if calls[k].index.kind == CS_T_ABSENT else _value(&calls[k].index)
        if index is not None and type(index) is not int:
            _turn_ollama.note_call(acc, acc._turn, index)
        elif len(acc._slots) != taken:
            turn_calls.append(index)
    if line.done:
        usage = {}
        if line.prompt_eval_count.kind != CS_T_ABSENT:
            usage["prompt_eval_count"] = _value(&line.prompt_eval_count)
        if line.eval_count.kind != CS_T_ABSENT:
            usage["eval_count"] = _value(&line.eval_count)
        # What _ollama.finish does, without the calls through Python.
        if usage:
            acc._state.usage = usage
        reason = _span_str(&line.reason)
        acc.choice_finished(0, "stop" if reason is None else reason)
        acc._complete_all()
    return 1


cdef bytes _ollama_head(const unsigned char *data, Py_ssize_t head_n):
    """Return a first line's fields up to message.role, closed: all the record reads of a first line.

    The turn takes from the first line its top-level fields but message and done (read only when no
    last line came, and in this shape all of them come before message) and its message's fields but
    the texts and calls (role: the rest of the message is texts and calls in this shape). A first line
    with calls is kilobytes long; its head is the model, created_at and role.
    """
    cdef bytes head = PyBytes_FromStringAndSize(NULL, head_n + 2)
    cdef char *out = PyBytes_AS_STRING(head)
    memcpy(out, data, head_n)
    out[head_n] = b'}'
    out[head_n + 1] = b'}'
    return head
