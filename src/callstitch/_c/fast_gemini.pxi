# Included by _accumulator_c.pyx after the Accumulator class: the Gemini fast path, module-level
# functions taking the accumulator first; each does exactly what the adapter does with those events,
# the turn's record (_turns/gemini.py) included.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_SIZE

from ._turns.gemini import _NO_RUN, CALL as _CALL, RUN as _RUN, GeminiTurn

cdef enum:
    _G_RUN = 0  # _turns.gemini.RUN and CALL, as C constants
    _G_CALL = 1
assert (_RUN, _CALL) == (_G_RUN, _G_CALL)


cdef int _gemini_fast(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Gemini chunk in place as _gemini.handle does; 0 sends it the general way."""
    # While a call's arguments stream, most chunks are the next piece of a string: try that first,
    # and before it the commonest of those, the last piece's chunk again with only its text changed.
    if acc._state.notes.open:
        if acc._gem_rep_tail >= 0 and _gemini_repeat(acc, data, n):
            _paths[PATH_GEMINI_REPEAT] += 1
            return 1
        if _gemini_piece(acc, data, n):
            _paths[PATH_GEMINI_PIECE] += 1
            return 1
    return _gemini_chunk(acc, data, n)


cdef int _gemini_repeat(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a chunk that is the last noted piece's chunk but for the piece's text, as _gemini_piece would; else 0.

    Every byte outside that string being the same, the chunk reads as that one did (same parts,
    jsonPath, willContinue, envelope, usage); what else _gemini_piece's answer depends on is the
    open call and the turn's log, checked here as it checks them.
    """
    cdef Py_ssize_t head = acc._gem_rep_head, tail = acc._gem_rep_tail
    cdef const unsigned char *end
    cdef int esc = 0
    cdef Py_ssize_t left
    cdef cs_val piece, usage
    if n < head + tail or memcmp(data, acc._gem_rep, head) != 0:
        return 0
    end = cs_str(data + head, data + n, &esc)  # the extractor's own string reader: it accepts what that does
    if end == NULL or data + n - end != tail or memcmp(end, acc._gem_rep + head, tail) != 0:
        return 0
    building = _gemini_open(acc, acc._gem_rep_choice)
    if (building is None or not building.open_ok or acc._gem_env is not acc._gem_rep_env
            or PyList_GET_SIZE(acc._gem_log) != acc._gem_logged or building.open_text != acc._gem_rep_path):
        return 0  # (_gem_env is that chunk's envelope, still the last logged: this one's needs no entry)
    piece.kind, piece.p, piece.n, piece.has_esc = CS_T_STR, data + head, end - (data + head), esc
    text = _span_str_v(&piece)
    left = building.left - len(text)
    if left < 0:
        return 0  # the piece goes past the call's room: put() keeps it and cuts the call there
    building.left = left
    building.pieces.append(text)  # what put() does with the next piece
    if acc._gem_rep_usage >= 0:
        usage.kind, usage.n = CS_T_OTHER, acc._gem_rep_usage_n
        usage.p = data + acc._gem_rep_usage + (0 if acc._gem_rep_usage < head else n - acc._gem_rep_n)
        acc._raw_usage(&usage)
    return 1


cdef int _gemini_note_repeat(Accumulator acc, const unsigned char *data, Py_ssize_t n, const cs_val *piece,
                             const cs_val *usage, object choice, object path) except -1:
    """Keep a piece's chunk (one that says more follows) for _gemini_repeat: all of it but the piece's text."""
    cdef Py_ssize_t head = piece.p - data, tail = data + n - (piece.p + piece.n)
    cdef char *grown
    acc._gem_rep_tail = -1
    if head + tail > acc._gem_rep_cap:
        if head + tail > 4096:
            return 0  # (a chunk that large is not one of a run of small pieces)
        grown = <char *>PyMem_Realloc(acc._gem_rep, 4096)
        if grown == NULL:
            raise MemoryError()
        acc._gem_rep, acc._gem_rep_cap = grown, 4096
    memcpy(acc._gem_rep, data, head)
    memcpy(acc._gem_rep + head, piece.p + piece.n, tail)
    acc._gem_rep_head, acc._gem_rep_tail, acc._gem_rep_n = head, tail, n
    acc._gem_rep_usage = usage.p - data if usage.kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY) else -1
    acc._gem_rep_usage_n = usage.n
    acc._gem_rep_choice, acc._gem_rep_path, acc._gem_rep_env = choice, path, acc._gem_env
    return 0


cdef int _gemini_chunk(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply a Gemini chunk as _gemini.handle does; 0 sends it the general way.

    Every part and partialArgs entry is located (and checked readable) before anything is
    applied, so a chunk is taken whole here or not at all.
    """
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef cs_val parts[16][9]
    cdef cs_val entries[16][8]
    cdef const unsigned char *part_at[16]
    cdef Py_ssize_t part_len[16]
    cdef const unsigned char *entry_at[16]
    cdef Py_ssize_t entry_len[16]
    cdef int part_entries[16]
    cdef int nparts, k, first = 0
    cdef cs_val *part
    cdef Py_ssize_t uncounted = n  # the chunk's size, until a part entry counts it against the turn's budget
    nparts = _gemini_candidate(acc, data, n, v, part_at, part_len)
    if nparts < 0 or not _gemini_locate(nparts, part_at, part_len, parts, part_entries, entries, entry_at, entry_len):
        return 0
    choice = v[1].i if v[1].kind == CS_T_INT else 0
    # (a look in the dict first: nearly every chunk is of a candidate kept already)
    if v[0].kind == CS_T_ARRAY and v[0].i == 1 and choice not in acc._choices and not acc.admit_choice(choice):
        return 0  # a candidate past Limits.choices: the general way skips its parts (asking again changes nothing)
    _gemini_envelope(acc, data, n, &v[3], &v[4])
    for k in range(nparts):
        if part_at[k][0] == b'{':
            part = parts[k]
            if _is_object(&part[2]):
                _gemini_call(acc, choice, part, entries[first], entry_at + first, entry_len + first, &uncounted,
                             part_entries[k])
            elif part[0].n or part[8].kind == CS_T_STR:  # a text part (_gemini_turn_part checked it is)
                _gemini_text(acc, choice, &v[1], part, &uncounted)
        first += part_entries[k]
    if v[2].kind == CS_T_STR:
        _gemini.finish_choice(acc, acc._state, choice, _span_str_v(&v[2]))
    if v[4].kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY):
        acc._raw_usage(&v[4])
    return 1


cdef inline int _gemini_candidate(Accumulator acc, const unsigned char *data, Py_ssize_t n, cs_val *v,
                                  const unsigned char **part_at, Py_ssize_t *part_len):
    """Read the chunk's one candidate (or none) into v and locate its parts; their count, or -1 for the general way."""
    cdef int nparts = 0
    if not cs_extract(data, n, _GEMINI, 8, v) or not (v[5].kind & (CS_T_ABSENT | CS_T_NULL)) \
            or v[4].kind == CS_T_STR or (not acc._seen and v[0].kind != CS_T_ARRAY):
        return -1  # (a chunk without candidates is any JSON object: Gemini's only once the stream is)
    if v[0].kind == CS_T_ARRAY and v[0].i == 1:
        if (not _is_object(&v[6]) or not (v[1].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_INT))
                or not (v[7].kind & (CS_T_ABSENT | CS_T_NULL) or _is_object(&v[7]))):
            return -1
        if v[3].kind == CS_T_ARRAY:
            nparts = cs_items(v[3].p, v[3].n, part_at, part_len, 16)
        elif not (v[3].kind & (CS_T_ABSENT | CS_T_NULL)):
            return -1
    elif not (v[0].kind & (CS_T_ABSENT | CS_T_NULL) or (v[0].kind == CS_T_ARRAY and v[0].i == 0)):
        return -1
    return nparts


cdef inline bint _gemini_locate(int nparts, const unsigned char **part_at, Py_ssize_t *part_len, cs_val (*parts)[9],
                                int *part_entries, cs_val (*entries)[8], const unsigned char **entry_at,
                                Py_ssize_t *entry_len):
    """Read each part, and each partialArgs entry in order over all parts; False if one is not read here."""
    cdef int k, j, m, nentries = 0
    for k in range(nparts):
        part_entries[k] = 0
        if part_at[k][0] != b'{':
            return False  # not an object: the adapter reports it and cuts what is open
        if not cs_extract(part_at[k], part_len[k], _GEMINI_PART, 9, parts[k]) or not _gemini_turn_part(parts[k],
                                                                                                  part_at[k], part_len[k]):
            return False
        if not (parts[k][7].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_ARRAY)):
            return False  # partialArgs that is no list: the adapter reports it and cuts what is open
        if parts[k][7].kind == CS_T_ARRAY and parts[k][7].i:
            m = cs_items(parts[k][7].p, parts[k][7].n, entry_at + nentries, entry_len + nentries, 16 - nentries)
            if m < 0:
                return False
            for j in range(nentries, nentries + m):
                if entry_at[j][0] != b'{':
                    entries[j][0].kind = 0  # not an object: unusable
                elif not cs_extract(entry_at[j], entry_len[j], _GEMINI_ENTRY, 8, entries[j]):
                    return False
            part_entries[k] = m
            nentries += m
    return True


cdef inline int _gemini_text(Accumulator acc, object choice, const cs_val *index, const cs_val *part,
                             Py_ssize_t *uncounted) except -1:
    """Apply a text part (a thought or not, a signature or not) of the candidate at index, as _gemini._text_part does."""
    cdef int which = 1 if _is_true(&part[1]) else 0
    cdef long long run = index.i if index.kind == CS_T_INT else 0
    cdef cs_span span
    run = run * 2 + which if 0 <= run < (1 << 40) else -2  # -2: never the open run's
    if part[8].kind == CS_T_STR:
        _gemini_log(acc, _G_RUN, choice, which, _span_str_v(&part[8]), -1, uncounted)
    elif acc._gem_run != run:
        _gemini_log(acc, _G_RUN, choice, which, None, run, uncounted)
    if part[0].n:
        span = _span(&part[0])
        acc._text_span(choice, which, &span)
    return 0


cdef int _gemini_piece(Accumulator acc, const unsigned char *data, Py_ssize_t n) except -1:
    """Apply, in one pass, a chunk of one part with one partialArgs entry, a string; 0 when it is anything else."""
    cdef cs_val v[12]  # what the extractor finds: a local, so that the Accumulator stays small (its class says why)
    cdef bint more, going_on
    cdef Py_ssize_t left
    if (not cs_extract(data, n, _GEMINI_PIECE, 12, v) or not (v[4].kind & (CS_T_ABSENT | CS_T_NULL))
            or v[0].kind != CS_T_ARRAY or v[0].i != 1 or v[5].kind != CS_T_ARRAY or v[5].i != 1
            or not _is_object(&v[6]) or (v[7].kind == CS_T_STR and v[7].n) or v[8].kind != CS_T_ARRAY
            or v[8].i != 1 or v[9].kind != CS_T_STR or v[10].kind != CS_T_STR
            or v[2].kind == CS_T_STR or v[3].kind == CS_T_STR
            or not (v[1].kind & (CS_T_ABSENT | CS_T_NULL | CS_T_INT))):
        return 0
    choice = v[1].i if v[1].kind == CS_T_INT else 0
    building = _gemini_open(acc, choice)
    if building is None or not _only_keys(v[5].p, v[5].n, &v[6], 1):
        return 0  # (a part with more than its functionCall, a signature say: the turn keeps it the general way)
    text = _span_str_v(&v[9])
    more = _is_true(&v[11])
    going_on = more and text == building.open_text
    if going_on and not building.open_ok:
        return 0  # nothing applied yet: the general way reports it
    _gemini_envelope(acc, data, n, &v[5], &v[3])
    piece = _span_str_v(&v[10])
    left = building.left - len(piece) if going_on else -1
    if left >= 0:
        building.left = left
        building.pieces.append(piece)  # what put() does with the next piece, while it fits in the room
    elif not building.put(text, "stringValue", piece, more):
        call = _loads_exact((<const char *>v[6].p)[:v[6].n])
        _gemini.unusable(acc, acc._state, call["partialArgs"][0], acc._data_offset, call)
    if v[3].kind & (CS_T_OTHER | CS_T_INT | CS_T_ARRAY):
        acc._raw_usage(&v[3])
    if more:
        _gemini_note_repeat(acc, data, n, &v[10], &v[3], choice, text)
    return 1


cdef int _gemini_call(Accumulator acc, object choice, cs_val *part, cs_val *entries,
                      const unsigned char **entry_at, Py_ssize_t *entry_len, Py_ssize_t *uncounted,
                      int count) except -1:
    """Apply one functionCall part as _gemini._call_part and _gemini._call do (entries: its partialArgs, count of them).

    uncounted: the chunk's size until a part entry counts it against the turn's budget (_gemini_log), then -1.
    """
    cdef cs_val *call = &part[2]
    cdef int j
    state = acc._state
    if part[3].kind == CS_T_STR and part[3].n:  # a name: a whole call, or one whose arguments stream next
        _gemini_log(acc, _G_CALL, choice, _span_str_v(&part[8]) if part[8].kind == CS_T_STR else None, None, -1,
                    uncounted)
        streamed = _is_true(&part[6]) and part[5].kind == CS_T_ABSENT
        if streamed or _gemini_open(acc, choice) is not None:
            _gemini.start_call(acc, state, choice, _span_str_v(&part[3]), _value(&part[4]), streamed,
                               None if streamed else _value(&part[5]))
            return 0
        # A whole call with nothing open before it: what start_call and _emit do.
        call_id = _value(&part[4])
        sent = (<const char *>part[5].p)[:part[5].n] if part[5].kind == CS_T_OTHER else None
        acc._take_whole(choice, call_id if type(call_id) is str else None, _span_str_v(&part[3]),
                         _value(&part[5]) if sent is None else _loads_exact(sent), sent)
        return 0
    building = _gemini_open(acc, choice)
    if building is None:
        if not (part[7].kind & (CS_T_ABSENT | CS_T_NULL)) or not (part[5].kind & (CS_T_ABSENT | CS_T_NULL)):
            state.error("unexpected shape", "functionCall arguments with no call open", acc._data_offset,
                        _loads_exact((<const char *>call.p)[:call.n]))
        return 0
    if part[7].kind == CS_T_ARRAY:
        for j in range(count):
            if not _gemini_entry(acc, building, entries + 8 * j):
                _gemini.unusable(acc, state, _loads_exact((<const char *>entry_at[j])[:entry_len[j]]),
                                 acc._data_offset, _loads_exact((<const char *>call.p)[:call.n]))
                break  # (the call is cut: nothing more of it is kept)
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
        # The next piece of the string being continued: what put() does with it, while it fits the room
        # (else put() says what is kept of it).
        piece = _span_str_v(&entry[1])
        if building.left >= len(piece):
            building.left -= len(piece)
            building.pieces.append(piece)
            return building.open_ok
        return building.put(text, "stringValue", piece, more)
    return building.put(text, _VALUE_KEYS[k - 1], _value(&entry[k]), more)


cdef inline bint _gemini_turn_part(cs_val *part, const unsigned char *at, Py_ssize_t n):
    """Tell whether a part is one the fast path keeps whole for the turn (else the general way carries it).

    That is text (thought a boolean, a signature a string, nothing else), or a functionCall with
    the fields the adapter reads and a signature only where it names a call. Anything else
    (inlineData, a field not known here …) the adapter records as sent.
    """
    cdef const cs_val *known[4]
    cdef const unsigned char *p
    if part[1].kind == CS_T_ABSENT and part[2].kind == CS_T_ABSENT and part[8].kind == CS_T_ABSENT:
        # The commonest part, {"text": …} alone: one ':' before the text, none after it.
        if part[0].kind != CS_T_STR:
            return False
        p = at
        while p < part[0].p and p[0] != b':':
            p += 1
        p += 1
        while p < part[0].p and p[0] != b':':
            p += 1
        if p < part[0].p:
            return False
        p = part[0].p + part[0].n
        while p < at + n and p[0] != b':':
            p += 1
        return p == at + n
    known[0], known[1], known[2], known[3] = &part[0], &part[1], &part[2], &part[8]
    if not (part[8].kind & (CS_T_ABSENT | CS_T_STR)) or not _only_keys_of(at, n, known, 4):
        return False
    if part[2].kind != CS_T_ABSENT:
        known[0], known[1], known[2], known[3] = &part[3], &part[4], &part[5], &part[6]
        return (_is_object(&part[2]) and part[0].kind == CS_T_ABSENT and part[1].kind == CS_T_ABSENT
                and _only_fields(part[2].p, part[2].n, known, &part[7])
                and (part[8].kind == CS_T_ABSENT or (part[3].kind == CS_T_STR and part[3].n)))
    return part[0].kind == CS_T_STR and (part[1].kind == CS_T_ABSENT or _is_true(&part[1]) or (
        part[1].kind == CS_T_OTHER and part[1].n == 5 and cs_same(part[1].p, b"false", 5)))


cdef bint _only_fields(const unsigned char *at, Py_ssize_t n, const cs_val **four, const cs_val *fifth):
    cdef const cs_val *known[5]
    known[0], known[1], known[2], known[3], known[4] = four[0], four[1], four[2], four[3], fifth
    return _only_keys_of(at, n, known, 5)


cdef bint _only_keys(const unsigned char *at, Py_ssize_t n, const cs_val *value, int count):
    """Tell whether the container at[0..n) holds no member but the count values located (value[0..count))."""
    cdef const cs_val *known[4]
    cdef int k
    for k in range(count):
        known[k] = &value[k]
    return _only_keys_of(at, n, known, count)


cdef inline bint _only_keys_of(const unsigned char *at, Py_ssize_t n, const cs_val **known, int count):
    """Tell whether the object at[0..n) has no key but those of the known values present in it.

    Every key is followed by a ':' outside any value of a known key; so the ':' outside the known
    values number the keys present exactly when no other key is there (its ':' would add one).
    """
    cdef const unsigned char *start[5]
    cdef const unsigned char *stop[5]
    cdef const unsigned char *p = at
    cdef const unsigned char *e
    cdef int present = 0, colons = 0, k, j
    for k in range(count):
        if known[k].kind != CS_T_ABSENT:
            j = present
            while j > 0 and start[j - 1] > known[k].p:  # in order of place (a handful: insertion)
                start[j], stop[j] = start[j - 1], stop[j - 1]
                j -= 1
            start[j], stop[j] = known[k].p, known[k].p + known[k].n
            present += 1
    for k in range(present + 1):
        e = start[k] if k < present else at + n
        while p < e:  # the gaps hold keys and punctuation only: a few bytes
            colons += p[0] == b':'
            p += 1
        if k < present:
            p = stop[k]
    return colons == present


cdef int _gemini_envelope(Accumulator acc, const unsigned char *data, Py_ssize_t n, const cs_val *one,
                          const cs_val *two) except -1:
    """Log the chunk's envelope (its text with two values, parts and usage, null) unless it is the last one logged.

    As GeminiTurn.take_envelope does: most chunks repeat modelVersion, responseId and the
    candidate's index, so the common case is a comparison in place, nothing made.
    """
    cdef const unsigned char *start[2]
    cdef const unsigned char *stop[2]
    cdef const unsigned char *p = data
    cdef const unsigned char *e
    cdef Py_ssize_t size = n, at = 0
    cdef int cuts = 0, k
    cdef const char *kept
    if one.kind != CS_T_ABSENT:
        start[0], stop[0] = one.p, one.p + one.n
        cuts = 1
    if two.kind != CS_T_ABSENT:
        k = 1 if cuts and one.p < two.p else 0
        if k == 0 and cuts:
            start[1], stop[1] = start[0], stop[0]
        start[k], stop[k] = two.p, two.p + two.n
        cuts += 1
    for k in range(cuts):
        size -= stop[k] - start[k] - 4  # each value becomes null
    envelope = acc._gem_env
    # The envelope noted is the last logged only while nothing else has logged since (the general path
    # may have); _gem_env is set only once _gem_log is, so the list is there when it is read.
    if envelope is not None and PyList_GET_SIZE(acc._gem_log) == acc._gem_logged and PyBytes_GET_SIZE(envelope) == size:
        kept = PyBytes_AS_STRING(envelope)
        for k in range(cuts + 1):
            e = start[k] if k < cuts else data + n
            if memcmp(kept + at, p, e - p) != 0:
                break
            at += e - p + 4
            if k < cuts:
                p = stop[k]
        else:
            return 0
    return _gemini_log_envelope(acc, data, n, start, stop, cuts, size)


cdef int _gemini_log_envelope(Accumulator acc, const unsigned char *data, Py_ssize_t n, const unsigned char **start,
                              const unsigned char **stop, int cuts, Py_ssize_t size) except -1:
    """Log a changed envelope: the chunk's text with the cut values (start[k]..stop[k]) null, size bytes."""
    cdef const unsigned char *p = data
    cdef const unsigned char *e
    cdef char *out
    cdef int k
    turn = _gemini_turn(acc)
    envelope = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(envelope)
    for k in range(cuts + 1):
        e = start[k] if k < cuts else data + n
        memcpy(out, p, e - p)
        out += e - p
        if k < cuts:
            memcpy(out, b"null", 4)
            out += 4
            p = stop[k]
    turn.log_envelope(envelope, n)  # (its envelope too, for the general path's own check)
    acc._gem_env = envelope
    acc._gem_logged = PyList_GET_SIZE(acc._gem_log)
    return 0


cdef object _gemini_turn(Accumulator acc):
    """Return state.turn, made if need be; forget the notes on it when the general path has logged since."""
    if acc._gem_turn is None:
        turn = acc._state.turn
        if turn is None:
            turn = acc._state.turn = GeminiTurn(acc._max_stream)  # (own_budget(), read in C)
        acc._gem_turn, acc._gem_log, acc._gem_logged = turn, turn.log, -1
    if PyList_GET_SIZE(acc._gem_log) != acc._gem_logged:
        acc._gem_env, acc._gem_run = None, -1
        acc._gem_logged = PyList_GET_SIZE(acc._gem_log)
    return acc._gem_turn


cdef inline void _gemini_logged(Accumulator acc):
    """Take note that GeminiTurn logged in this path's stead: the open run ends if it logged anything."""
    if PyList_GET_SIZE(acc._gem_log) != acc._gem_logged:
        acc._gem_logged = PyList_GET_SIZE(acc._gem_log)
        acc._gem_run = -1


cdef int _gemini_log(Accumulator acc, int kind, object choice, object a, object b, long long run,
                     Py_ssize_t *uncounted) except -1:
    """Log a part's event as GeminiTurn.event does (within the turn's budget), with where the choice's texts end.

    run: the key of the unsigned text run this entry goes on with (its next piece needs no entry:
    RUN entries that go on with the open run change nothing), or -1.
    """
    cdef list texts = acc._texts.get(choice)
    cdef Py_ssize_t length0 = 0, length1 = 0
    turn = acc._gem_turn
    if kind == _G_RUN and b is None and turn.open_run == (choice, a, PyList_GET_SIZE(acc._gem_log)):
        acc._gem_run = run  # the run GeminiTurn notes open goes on (the general path may have logged it)
        return 0
    if kind == _G_CALL and not acc.calls_left():
        turn.gap(acc, choice)  # a call Limits.calls drops: as GeminiTurn.event notes it
        _gemini_logged(acc)
        return 0
    if uncounted[0] >= 0:  # (what _dispatch.handle_event notes of every event it is given, when it is needed)
        acc._state.event_size = uncounted[0]
        uncounted[0] = -1
    if (kind == _G_RUN or a is not None) and (turn.cut or not acc.keep_own(None)):
        turn.refuse(acc, kind, choice)  # past the turn's budget, as GeminiTurn.event does (_counted)
        _gemini_logged(acc)
        return 0
    if texts is not None:
        if texts[0] is not None:
            length0 = PyByteArray_GET_SIZE((<Text>texts[0]).buf)
        if texts[1] is not None:
            length1 = PyByteArray_GET_SIZE((<Text>texts[1]).buf)
    acc._gem_log.append((kind, choice, length0, length1, a, b))
    acc._gem_logged = PyList_GET_SIZE(acc._gem_log)
    acc._gem_run = run
    # GeminiTurn's own notes, as its _log keeps them: both paths read them
    turn.open_run = (choice, a, acc._gem_logged) if kind == _G_RUN and b is None else _NO_RUN
    if turn.gapped:
        turn.gapped.discard(choice)
    return 0
