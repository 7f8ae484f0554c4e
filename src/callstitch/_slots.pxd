# The C types of _slots.py when the compiled build compiles it (Cython's pure-Python mode): the
# fields of the slot classes and the signatures the compiled accumulator calls without Python.
# The pure twin never reads this file. A field or method added to _slots.py that the compiled
# accumulator (or a typed local) reaches must be declared here too.

cimport cython


cdef class Slot:
    cdef object choice
    cdef Py_ssize_t seq
    cdef Py_ssize_t position
    cdef object id
    cdef object name
    cdef bytearray buf
    cdef Py_ssize_t last_start
    cdef Py_ssize_t nfrags
    cdef object cumulative
    cdef int pending
    cdef int quirks
    cdef object call
    cdef Py_ssize_t call_nfrags
    cdef int over
    cdef bint shared
    cdef object parsed
    cdef bint custom
    cdef int late
    cdef object end


cdef class ChoiceState:
    cdef dict by_index
    cdef Slot latest
    cdef Py_ssize_t count
    cdef list open


cdef class Text:
    cdef bytearray buf
    cdef int pending
    cdef bint cut


cdef class SlotBook:
    cdef object _state
    cdef list _slots
    cdef list _open
    cdef dict _choices
    cdef dict _texts
    cdef list _done
    cdef object _result
    cdef Py_ssize_t _max_call, _max_stream, _max_calls, _max_choices, _max_event
    cdef Py_ssize_t _kept
    cdef list _lazy
    cdef Py_ssize_t _lazy_bound
    cdef bint _full
    cdef int _dropped
    cdef set _capped
    cdef Py_ssize_t _own_kept
    cdef bint _own_full
    cdef Py_ssize_t _nchoices
    cdef Py_ssize_t _wholes
    cdef bint _fed
    cdef Py_ssize_t _event_at

    cdef _start(self, object state, tuple numbers)
    cdef int _end_of_stream(self) except -1

    @cython.locals(cs=ChoiceState, slot=Slot, data=bytes)
    cpdef fragment(self, object choice, object index, object call_id, object name, object arguments)
    @cython.locals(slot=Slot)
    cpdef custom_fragment(self, object choice, object index, object call_id, object name, object text)
    @cython.locals(cs=ChoiceState, slot=Slot)
    cpdef identify(self, object choice, object index, object call_id, object name)
    @cython.locals(cs=ChoiceState, slot=Slot)
    cpdef whole(self, object choice, object call_id, object name, object arguments, Py_ssize_t room=*)
    cdef _whole_value(self, Slot slot, object arguments, object data)

    @cython.locals(quirks=int, cs=ChoiceState, slot=Slot)
    cdef Slot _route(self, object choice, object index, object call_id, object name, bint whole)
    @cython.locals(slot=Slot)
    cdef Slot _find_slot(self, ChoiceState cs, object choice, object index, object call_id, object name, bint whole)
    @cython.locals(slot=Slot)
    cdef Slot _new_slot(self, ChoiceState cs, object choice, object call_id, object name)

    @cython.locals(n=Py_ssize_t, buf=bytearray, size=Py_ssize_t, grow=Py_ssize_t, cumulative=list,
                   continues=bint, prefix=bytes)
    cdef _append(self, Slot slot, bytes data)
    @cython.locals(buf=bytearray, size=Py_ssize_t, n=Py_ssize_t, kept=Py_ssize_t)
    cdef bint _extend(self, Slot slot, bytes data) except -1
    cdef bint _takes(self, Slot slot, str text) except -1
    cdef bint _stream_over(self, Py_ssize_t grow) except -1
    cdef _cut(self, Slot slot, int limit)
    cdef _budget_spent(self, str first)
    cdef bint _choice_fits(self, object choice) except -1
    cpdef bint admit_choice(self, object choice) except -1
    cpdef choice_finished(self, object choice, object reason)
    cpdef Py_ssize_t argument_room(self)
    cpdef bint spend(self, Py_ssize_t size) except -1
    @cython.locals(size=Py_ssize_t)
    cpdef bint keep_own(self, object kept) except -1
    @cython.locals(cs=ChoiceState, slot=Slot)
    cpdef object call_at(self, object choice, object index)
    cdef _cap(self, str name, str first)
    @cython.locals(slot=Slot, t=Text)
    cpdef cut_open(self, int cause=*)

    @cython.locals(t=Text)
    cpdef text_piece(self, object choice, int which, str text)
    @cython.locals(texts=list, t=Text)
    cdef Text _text_buf(self, object choice, int which)
    @cython.locals(texts=list, t=Text)
    cpdef text_length(self, object choice, int which)
    @cython.locals(t=Text)
    cdef tuple _text_bytes(self, object choice)

    @cython.locals(cs=ChoiceState, slot=Slot)
    cpdef complete(self, object choice, object index)
    @cython.locals(slot=Slot)
    cdef _complete_all(self)
    cdef object _settle(self, Slot slot, bint final)
    cdef object _long_run(self, bytearray buf)
    @cython.locals(s=Slot)
    cdef object _build(self)


@cython.locals(slot=Slot)
cdef Slot new_slot(object choice, Py_ssize_t seq, Py_ssize_t position)
cdef _unshare(Slot slot)
cdef Slot _refused(ChoiceState cs, object index)
cdef bint _had_arguments(Slot slot) noexcept
cdef _follow_cut(Slot slot, bytes data)
cdef bint _complete(Slot slot) except -1
cdef bint _zero_keys(dict d) except -1
