# Included by _accumulator_c.pyx after the Accumulator class: the Gemini fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events.


cdef int _gemini_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Gemini chunk in place as _gemini.handle does; 0 sends it the general way."""
    # While a call's arguments stream, most chunks are the next piece of a string: try that first.
    if acc._state.notes.open and _gemini_piece(acc, data, n):
        _paths[PATH_GEMINI_PIECE] += 1
        return 1
    return _gemini_chunk(acc, data, n)


cdef int _gemini_chunk(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Gemini chunk as _gemini.handle does; 0 sends it the general way.

    Every part and partialArgs entry is located (and checked readable) before anything is
    applied, so a chunk is taken whole here or not at all.
    """
    cdef cs_val *v = acc._vals
    cdef cs_val parts[16][8]
    cdef cs_val entries[16][8]
    cdef const unsigned char *part_at[16]
    cdef Py_ssize_t part_len[16]
    cdef const unsigned char *entry_at[16]
    cdef Py_ssize_t entry_len[16]
    cdef int part_entries[16]
    cdef int nparts = 0, nentries = 0, k, j, m, first
    cdef cs_val *part
    cdef cs_span span
    if not cs_extract(data, n, _GEMINI, 8, v) or not (v[5].kind & (CS_T_ABSENT | CS_T_NULL)) \
            or v[4].kind == CS_T_STR or (not acc._seen and v[0].kind != CS_T_ARRAY):
        return 0  # (a chunk without candidates is any JSON object: Gemini's only once the stream is)
    if v[0].kind == CS_T_ARRAY and v[0].i == 1:
        if (not _is_object(&v[6]) or not (v[1].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_INT))
                or not (v[7].kind & (CS_T_ABSENT | CS_T_NULL) or _is_object(&v[7]))):
            return 0
        if v[3].kind == CS_T_ARRAY:
            nparts = cs_items(v[3].p, v[3].n, part_at, part_len, 16)
            if nparts < 0:
                return 0
        elif not (v[3].kind & (CS_T_ABSENT | CS_T_NULL)):
            return 0
    elif not (v[0].kind & (CS_T_ABSENT | CS_T_NULL) or (v[0].kind == CS_T_ARRAY and v[0].i == 0)):
        return 0
    for k in range(nparts):
        part_entries[k] = 0
        if part_at[k][0] != b'{':
            continue  # not an object: the adapter skips it
        if not cs_extract(part_at[k], part_len[k], _GEMINI_PART, 8, parts[k]):
            return 0
        if parts[k][7].kind == CS_T_ARRAY and parts[k][7].i:
            m = cs_items(parts[k][7].p, parts[k][7].n, entry_at + nentries, entry_len + nentries, 16 - nentries)
            if m < 0:
                return 0
            for j in range(nentries, nentries + m):
                if entry_at[j][0] != b'{':
                    entries[j][0].kind = 0  # not an object: unusable
                elif not cs_extract(entry_at[j], entry_len[j], _GEMINI_ENTRY, 8, entries[j]):
                    return 0
            part_entries[k] = m
            nentries += m
    choice = v[1].i if v[1].kind == CS_T_INT else 0
    first = 0
    for k in range(nparts):
        if part_at[k][0] == b'{':
            part = parts[k]
            if _is_object(&part[2]):
                _gemini_call(acc, choice, part, entries[first], entry_at + first, entry_len + first,
                                  part_entries[k])
            elif part[0].kind == CS_T_STR and part[0].n:
                span = _span(&part[0])
                acc._text_span(choice, 1 if _is_true(&part[1]) else 0, &span)
        first += part_entries[k]
    if v[2].kind == CS_T_STR:
        _gemini.finish_choice(acc, acc._state, choice, _span_str_v(&v[2]))
    if v[4].kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY):
        acc._raw_usage(&v[4])
    return 1


cdef int _gemini_piece(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply, in one pass, a chunk of one part with one partialArgs entry, a string; 0 when it is anything else."""
    cdef cs_val *v = acc._vals
    cdef bint more
    if (not cs_extract(data, n, _GEMINI_PIECE, 12, v) or not (v[4].kind & (CS_T_ABSENT | CS_T_NULL))
            or v[0].kind != CS_T_ARRAY or v[0].i != 1 or v[5].kind != CS_T_ARRAY or v[5].i != 1
            or not _is_object(&v[6]) or (v[7].kind == CS_T_STR and v[7].n) or v[8].kind != CS_T_ARRAY
            or v[8].i != 1 or v[9].kind != CS_T_STR or v[10].kind != CS_T_STR
            or v[2].kind == CS_T_STR or v[3].kind == CS_T_STR
            or not (v[1].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_INT))):
        return 0
    building = _gemini_open(acc, v[1].i if v[1].kind == CS_T_INT else 0)
    if building is None:
        return 0
    text = _span_str_v(&v[9])
    more = _is_true(&v[11])
    if more and text == building.open_text:
        if not building.open_ok:
            return 0  # nothing applied yet: the general way reports it
        building.pieces.append(_span_str_v(&v[10]))  # what put() does with the next piece
    elif not building.put(text, "stringValue", _span_str_v(&v[10]), more):
        call = _loads((<const char *>v[6].p)[:v[6].n])
        _gemini.unusable(acc._state, call["partialArgs"][0], acc._data_offset, call)
    if v[3].kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY):
        acc._raw_usage(&v[3])
    return 1


cdef int _gemini_call(Accumulator acc, object choice, cs_val *part, cs_val *entries, const unsigned char **entry_at,
                      Py_ssize_t *entry_len, int count) except -1:
    """Apply one functionCall part as _gemini._call does (entries: its partialArgs, count of them)."""
    cdef cs_val *call = &part[2]
    cdef int j
    state = acc._state
    if part[3].kind == CS_T_STR and part[3].n:  # a name: a whole call, or one whose arguments stream next
        streamed = _is_true(&part[6]) and part[5].kind == CS_T_ABSENT
        if streamed or _gemini_open(acc, choice) is not None:
            _gemini.start_call(acc, state, choice, _span_str_v(&part[3]), _value(&part[4]), streamed,
                               None if streamed else _value(&part[5]))
            return 0
        # A whole call with nothing open before it: what start_call and _emit do.
        call_id = _value(&part[4])
        sent = (<const char *>part[5].p)[:part[5].n] if part[5].kind == CS_T_OTHER else None
        acc._take_whole(choice, call_id if type(call_id) is str else None, _span_str_v(&part[3]),
                         _value(&part[5]) if sent is None else _loads(sent), sent)
        return 0
    building = _gemini_open(acc, choice)
    if building is None:
        if not (part[7].kind & (CS_T_ABSENT | CS_T_NULL)) or not (part[5].kind & (CS_T_ABSENT | CS_T_NULL)):
            state.error("unexpected shape", "functionCall arguments with no call open", acc._data_offset,
                        _loads((<const char *>call.p)[:call.n]))
        return 0
    if part[7].kind == CS_T_ARRAY:
        for j in range(count):
            if not _gemini_entry(acc, building, entries + 8 * j):
                _gemini.unusable(state, _loads((<const char *>entry_at[j])[:entry_len[j]]), acc._data_offset,
                                 _loads((<const char *>call.p)[:call.n]))
    elif part[7].kind == CS_T_ABSENT and _empty_object(call):
        _gemini.close_open(acc, state, choice)  # the bare functionCall: {} closes the call
    return 0


cdef object _gemini_open(Accumulator acc, object choice):
    """Return the choice's call whose arguments are being streamed, or None (_gemini.open_call)."""
    return acc._state.notes.open.get(choice)


cdef object _gemini_entry(Accumulator acc, object building, cs_val *entry):
    """Apply one partialArgs entry as _gemini.Builder.apply does; return what it returns."""
    cdef int k
    cdef bint more = _is_true(&entry[7])
    if entry[0].kind != CS_T_STR:
        return False  # not an object, or no jsonPath string
    for k in range(1, 7):
        if entry[k].kind != CS_T_ABSENT:
            break
    else:
        return more  # a bare continuation marker
    text = _span_str_v(&entry[0])
    if k == 1 and more and entry[1].kind == CS_T_STR and text == building.open_text:
        # The next piece of the string being continued: what put() does with it.
        building.pieces.append(_span_str_v(&entry[1]))
        return building.open_ok
    return building.put(text, _VALUE_KEYS[k - 1], _value(&entry[k]), more)
