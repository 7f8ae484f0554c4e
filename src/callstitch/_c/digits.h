/*
 * digits.h -- telling whether a JSON text may hold an integer orjson cannot
 * hold: one of 19 digits or more in a row (_exactjson.LONG_RUN, whose
 * definition this is in C; the tests hold the two to the same answers).
 */
#ifndef CALLSTITCH_DIGITS_H
#define CALLSTITCH_DIGITS_H

#include <Python.h>

#define CS_LONG_RUN 19

static inline int cs_is_digit(unsigned char c) { return (unsigned char)(c - '0') < 10; }

/* Tell whether p[0..n) holds CS_LONG_RUN or more ASCII digits in a row.
 * Only every CS_LONG_RUN-th byte is looked at (a run that long covers one of
 * them); a digit there is measured both ways, and the look goes on past it. */
static inline int cs_long_digit_run(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = CS_LONG_RUN - 1;
    while (i < n) {
        if (!cs_is_digit(p[i])) {
            i += CS_LONG_RUN;
            continue;
        }
        Py_ssize_t lo = i, hi = i + 1;
        while (lo > 0 && cs_is_digit(p[lo - 1]))
            lo--;
        while (hi < n && cs_is_digit(p[hi]))
            hi++;
        if (hi - lo >= CS_LONG_RUN)
            return 1;
        i = hi + CS_LONG_RUN;  /* p[hi] is no digit: a run after it starts at hi + 1 or later */
    }
    return 0;
}

#endif /* CALLSTITCH_DIGITS_H */
