/*
 * paths.h -- the generic validating field extractor (cs_extract): one JSON
 * object validated, and what sits at each wanted path reported; the element
 * spans of an array it located (cs_items).  The per-format fast paths of the
 * compiled twin read their events with it.
 */
#ifndef CALLSTITCH_PATHS_H
#define CALLSTITCH_PATHS_H

#include "lex.h"

/* ------------------------------------------------------------------------ */
/* generic validating field extractor                                        */
/* ------------------------------------------------------------------------ */
/*
 * cs_extract(p, n, wants, nwants, out) validates p[0..n) as exactly one JSON
 * object (same rules and conservative limits as cs_scan_chat_chunk: RFC 8259,
 * UTF-8, escapes, no lone surrogates, digits + |exponent| <= 300, depth <= 64,
 * surrounding whitespace allowed, no BOM) and reports, for every want, what
 * sits at its path.  Returns 1 only when everything below holds, else 0
 * ("hand it to the general path"; out is then unspecified).
 *
 * A path is a NULL-terminated list of 1..CS_MAX_PATH elements, starting at
 * the top-level object.  Each element is applied to the value reached so far:
 *   - that value is an object: the element is a key, compared with the raw
 *     key bytes (so "#0" is just the key "#0" here);
 *   - that value is an array: the element must be an index "#K" ('#'
 *     followed by one or more decimal digits, K < 2^31; leading zeros allowed,
 *     "#007" is element 7), meaning element K (0-based); an array with fewer
 *     than K+1 elements makes the want CS_T_ABSENT.  Any other element
 *     (including "#2147483648", "#", "#-1") on an array -> return 0;
 *   - that value is null: the want is CS_T_ABSENT;
 *   - anything else (string, number, true/false) -> return 0.
 *
 *   out[k].kind = CS_T_ABSENT  a key on the path is missing, an index is out
 *                              of range, or an intermediate value is null
 *               = CS_T_NULL    null
 *               = CS_T_STR     string: p/n/has_esc as in cs_span (raw bytes
 *                              between the quotes; decode with cs_unescape)
 *               = CS_T_INT     integer literal (no fraction/exponent) that
 *                              fits int64: value in .i
 *               = CS_T_ARRAY   array, ONLY if wants[k].allowed has the
 *                              CS_T_ARRAY bit: element count in .i
 *               = CS_T_OTHER   true/false/other number/object, and arrays
 *                              (every kind but CS_T_STR also has p/n: the value's raw text)
 *                              when wants[k].allowed lacks CS_T_ARRAY
 *
 * Returns 0 when: a path step hits a value that is neither null nor a
 * container it applies to (above); out[k].kind is not in wants[k].allowed; a
 * key on a wanted path (at its level) occurs twice in the same object; any
 * key that contains a backslash occurs in an interpreted object (the
 * top-level object and every object reached along a wanted path before its
 * last element, including objects inside arrays reached through "#K");
 * nwants is outside 0..CS_MAX_WANTS; a path is empty or has more than
 * CS_MAX_PATH elements (path[CS_MAX_PATH] must be NULL); two wants end at
 * the same value and that value is present (e.g. the same path twice, or
 * "#0" and "#00" on the same array).  A wanted key containing '"', '\\', a
 * control character or invalid UTF-8 never matches (such a key could only
 * appear escaped, which forces 0 anyway).  Everything off the wanted paths
 * is validated and skipped; nothing is allocated.
 *
 * No set-up per call beyond one pass over wants: each interpreted container
 * carries the bitmask of wants whose path leads through it; each object key
 * is compared only against those wants' key at that level, and each array
 * parses those wants' "#K" once.
 */
enum { CS_T_ABSENT = 1, CS_T_NULL = 2, CS_T_STR = 4, CS_T_INT = 8, CS_T_OTHER = 16, CS_T_ARRAY = 32 };
#define CS_MAX_WANTS 12
#define CS_MAX_PATH 10      /* elements per path; path[] has one more slot for the NULL */

typedef struct {
    const char *path[CS_MAX_PATH + 1];  /* keys / "#K" indexes from the top-level object, NULL-terminated */
    int allowed;                        /* bitmask of CS_T_* kinds this field may have */
} cs_want;

typedef struct {
    int kind;                           /* one CS_T_* bit */
    const unsigned char *p; ptrdiff_t n; int has_esc;   /* CS_T_STR (as cs_span) */
    int64_t i;                          /* CS_T_INT: value; CS_T_ARRAY: element count */
} cs_val;

typedef struct {
    const cs_want *w;
    cs_val *out;
    unsigned ends[CS_MAX_PATH];         /* wants whose path has exactly level+1 elements */
} cs_xctx;

/* 1 if the NUL-terminated s equals the n raw key bytes k. k holds no NUL
 * (validated JSON string text), so s is never read past its terminator. */
static CS_ALWAYS_INLINE int cs_xkeq(const char *s, const unsigned char *k, ptrdiff_t n)
{
    ptrdiff_t i;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] != k[i]) return 0;
    return s[n] == '\0';
}

/* Path element "#K" (K decimal digits, leading zeros allowed, K < 2^31) ->
 * K; anything else -> -1. */
static inline int32_t cs_xidx(const char *s)
{
    uint64_t k = 0;
    const unsigned char *q = (const unsigned char *)s;
    if (q[0] != '#' || q[1] == '\0') return -1;
    for (q++; *q; q++) {
        unsigned c = (unsigned)(*q - '0');
        if (c >= 10u) return -1;
        k = k * 10u + c;                            /* k < 2^31 before: no wrap */
        if (k >= UINT64_C(0x80000000)) return -1;
    }
    return (int32_t)k;
}

/* Read a key of an interpreted object at `level` (p at '"') and the ':'
 * after it. *match = the subset of `active` whose path[level] equals the
 * key. Returns a pointer to the value (p < e) or NULL (invalid, or the key
 * contains an escape). */
static CS_ALWAYS_INLINE const unsigned char *cs_xkey(const cs_xctx *cx, unsigned active, int level,
                                                     const unsigned char *p, const unsigned char *e,
                                                     unsigned *match)
{
    const unsigned char *q;
    unsigned m = 0;
    int esc = 0;
    if (p >= e || *p != '"') return NULL;
#ifdef CS_SSE2
    if (CS_LIKELY(e - p >= 17)) {
        /* common case: clean ASCII key ending within the next 16 bytes */
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 1));
        unsigned mq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))) | 0x10000u;
        unsigned ms = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')),
                                                               _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)))) | 0x10000u;
        unsigned iq = (unsigned)__builtin_ctz(mq);
        if (CS_LIKELY(iq < (unsigned)__builtin_ctz(ms))) {
            q = p + 1 + iq;
            goto found;
        }
    }
#endif
    q = cs_str(p + 1, e, &esc);
    if (!q || esc) return NULL;
#ifdef CS_SSE2
found:
#endif
    {
        /* wants sharing a path prefix usually share the key pointer: reuse
         * the previous comparison when the pointer repeats */
        const char *last = NULL;
        int lastr = 0;
        const ptrdiff_t kn = q - (p + 1);
        const unsigned char c0 = p[1];    /* '"' when the key is empty */
        while (active) {
            unsigned j = (unsigned)__builtin_ctz(active);
            const char *s = cx->w[j].path[level];
            active &= active - 1u;
            if (s != last) {
                last = s;
                lastr = kn ? ((unsigned char)s[0] == c0 && cs_xkeq(s + 1, p + 2, kn - 1)) : (s[0] == '\0');
            }
            if (lastr) m |= 1u << j;
        }
    }
    *match = m;
    return cs_after_key(q, e);
}

/* Number at p, validated as cs_num does; classified into *v. */
static CS_ALWAYS_INLINE const unsigned char *cs_xnum(const unsigned char *p, const unsigned char *e, cs_val *v)
{
    const unsigned char *q = cs_num(p, e), *s = p;
    uint64_t u = 0;
    int neg;
    if (!q) return NULL;
    v->kind = CS_T_OTHER;
    neg = (*s == '-');
    s += neg;
    if (q - s > 19) return q;                       /* >= 1e19 > INT64_MAX */
    for (; s < q; s++) {
        unsigned c = (unsigned)(*s - '0');
        if (c >= 10u) return q;                     /* fraction or exponent */
        u = u * 10u + c;                            /* <= 19 digits: no wrap */
    }
    if (neg) {
        if (u > (UINT64_C(1) << 63)) return q;
        v->i = (u == (UINT64_C(1) << 63)) ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) return q;
        v->i = (int64_t)u;
    }
    v->kind = CS_T_INT;
    return q;
}

static const unsigned char *cs_xobj(const cs_xctx *cx, unsigned active, int level,
                                    const unsigned char *p, const unsigned char *e);
static const unsigned char *cs_xarr(const cs_xctx *cx, unsigned active, int level,
                                    const unsigned char *p, const unsigned char *e, cs_val *v);

/* A value on a wanted path, inside the interpreted container at `level`
 * (its nesting depth is level + 1).  m = wants continuing below this value,
 * leaf = the (at most one) want ending at it; m | leaf != 0.  p at the
 * value (p < e).  Returns pointer past the value or NULL. */
static CS_ALWAYS_INLINE const unsigned char *cs_xval(const cs_xctx *cx, unsigned m, unsigned leaf, int level,
                                                     const unsigned char *p, const unsigned char *e)
{
    const int depth = level + 1;
    cs_val *v = leaf ? &cx->out[__builtin_ctz(leaf)] : NULL;
    const unsigned char *r;
    switch (*p) {
    case '"': {
        const unsigned char *q;
        int esc = 0;
        if (m) return NULL;
        q = cs_str(p + 1, e, &esc);
        if (!q) return NULL;
        v->kind = CS_T_STR;
        v->p = p + 1;
        v->n = q - (p + 1);
        v->has_esc = esc;
        return q + 1;
    }
    case 'n':
        if (!cs_is_null(p, e)) return NULL;
        if (v) v->kind = CS_T_NULL;
        r = p + 4;
        break;
    case '{':
        if (v) v->kind = CS_T_OTHER;
        r = m ? cs_xobj(cx, m, level + 1, p, e) : cs_skip(p, e, depth);
        break;
    case '[':
        if (m || (cx->w[__builtin_ctz(leaf)].allowed & CS_T_ARRAY)) {
            r = cs_xarr(cx, m, level + 1, p, e, v);
        } else {
            v->kind = CS_T_OTHER;
            r = cs_skip(p, e, depth);
        }
        break;
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        if (m) return NULL;
        r = cs_xnum(p, e, v);
        break;
    default:                                       /* true / false / invalid */
        if (m) return NULL;
        v->kind = CS_T_OTHER;
        r = cs_skip(p, e, depth);
        break;
    }
    /* Every value that is not a string also gets its raw text: p/n span the value as sent. */
    if (v && r) {
        v->p = p;
        v->n = r - p;
        v->has_esc = 0;
    }
    return r;
}

/* Interpreted object at `level` (top-level object = 0, nesting depth
 * level + 1); `active` = wants whose path continues through it.  p at '{'.
 * Returns pointer past the closing '}' or NULL.  Recursion depth is bounded
 * by CS_MAX_PATH. */
static const unsigned char *cs_xobj(const cs_xctx *cx, unsigned active, int level,
                                    const unsigned char *p, const unsigned char *e)
{
    const int depth = level + 1;
    unsigned seen = 0, m, leaf;
    int r;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_xkey(cx, active, level, p, e, &m);
        if (!p) return NULL;
        if (!m) {
            p = cs_skipv(p, e, depth);
        } else {
            if (seen & m) return NULL;                 /* duplicate wanted key */
            seen |= m;
            leaf = m & cx->ends[level];                /* wants ending at this key */
            m &= ~leaf;                                /* wants continuing below */
            if (leaf & (leaf - 1u)) return NULL;       /* two wants, same path */
            p = cs_xval(cx, m, leaf, level, p, e);
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* Array at `level` (nesting depth level + 1) on a wanted path; `active` =
 * wants whose path continues through it (their path[level] must be "#K"),
 * v = the want ending at the array itself (NULL if none; its kind becomes
 * CS_T_ARRAY with the element count if it allows CS_T_ARRAY, else
 * CS_T_OTHER).  p at '['.  Returns pointer past the ']' or NULL. */
static CS_NOINLINE const unsigned char *cs_xarr(const cs_xctx *cx, unsigned active, int level,
                                                const unsigned char *p, const unsigned char *e, cs_val *v)
{
    const int depth = level + 1;
    int32_t ix[CS_MAX_WANTS];
    int64_t cnt = 0;
    uint32_t hi = 0;                                   /* elements 0..hi-1 may be wanted */
    unsigned a = active, m, leaf;
    int r;
    {
        const char *last = NULL;
        int32_t lastk = -1;
        while (a) {
            unsigned j = (unsigned)__builtin_ctz(a);
            const char *s = cx->w[j].path[level];
            a &= a - 1u;
            if (s != last) { last = s; lastk = cs_xidx(s); }
            if (lastk < 0) return NULL;                /* key step on an array */
            ix[j] = lastk;
            if ((uint32_t)lastk >= hi) hi = (uint32_t)lastk + 1u;
        }
    }
    p = cs_ws(p + 1, e);
    if (p < e && *p == ']') { p++; goto done; }
    for (;;) {
        if (p >= e) return NULL;
        m = 0;
        if ((uint64_t)cnt < hi) {
            a = active;
            while (a) {
                unsigned j = (unsigned)__builtin_ctz(a);
                a &= a - 1u;
                if (ix[j] == cnt) m |= 1u << j;
            }
        }
        if (!m) {
            p = cs_skipv(p, e, depth);
        } else {
            leaf = m & cx->ends[level];
            m &= ~leaf;
            if (leaf & (leaf - 1u)) return NULL;       /* two wants, same element */
            p = cs_xval(cx, m, leaf, level, p, e);
        }
        if (!p) return NULL;
        cnt++;
        r = cs_next_member(&p, e, ']');
        if (r < 0) return NULL;
        if (r == 0) break;
    }
done:
    if (v) {
        if (cx->w[v - cx->out].allowed & CS_T_ARRAY) {
            v->kind = CS_T_ARRAY;
            v->i = cnt;
        } else {
            v->kind = CS_T_OTHER;
        }
    }
    return p;
}

/* 1 = understood (out[0..nwants) filled), 0 = hand to the general path. */
static inline int cs_extract(const unsigned char *p, ptrdiff_t n, const cs_want *wants, int nwants, cs_val *out)
{
    const unsigned char *e = p + n;
    cs_xctx cx;
    int k, d;
    if (nwants < 0 || nwants > CS_MAX_WANTS || (nwants > 0 && (!wants || !out))) return 0;
    for (d = 0; d < CS_MAX_PATH; d++) cx.ends[d] = 0;
    for (k = 0; k < nwants; k++) {
        const char *const *pa = wants[k].path;
        out[k].kind = CS_T_ABSENT;
        out[k].p = NULL;
        out[k].n = 0;
        out[k].has_esc = 0;
        out[k].i = 0;
        if (!pa[0] || pa[CS_MAX_PATH]) return 0;
        for (d = 1; pa[d]; d++) {}
        cx.ends[d - 1] |= 1u << k;
    }
    cx.w = wants;
    cx.out = out;
    if (!p || n <= 0) return 0;
    p = cs_ws(p, e);
    if (p >= e || *p != '{') return 0;
    p = cs_xobj(&cx, nwants ? (1u << nwants) - 1u : 0u, 0, p, e);
    if (!p) return 0;
    p = cs_ws(p, e);
    if (p != e) return 0;
    for (k = 0; k < nwants; k++)
        if (!(out[k].kind & wants[k].allowed)) return 0;
    return 1;
}

/* cs_items(p, n, starts, lens, max): the elements of an array whose raw text
 * p[0..n) cs_extract has already validated (a CS_T_ARRAY or CS_T_OTHER span
 * starting at '[').  Fills the spans of at most max elements and returns their
 * count; -1 when there are more than max, or p is not such an array. */
static inline int cs_items(const unsigned char *p, ptrdiff_t n, const unsigned char **starts, ptrdiff_t *lens,
                           int max)
{
    const unsigned char *e = p + n, *q;
    int k = 0, r;
    if (!p || n < 2 || *p != '[') return -1;
    p = cs_ws(p + 1, e);
    if (p < e && *p == ']') return 0;
    for (;;) {
        if (p >= e || k == max) return -1;
        q = cs_skipv(p, e, 1);
        if (!q) return -1;
        starts[k] = p;
        lens[k] = q - p;
        k++;
        p = q;
        r = cs_next_member(&p, e, ']');
        if (r < 0) return -1;
        if (r == 0) return k;
    }
}

#endif /* CALLSTITCH_PATHS_H */
