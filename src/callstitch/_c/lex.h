/*
 * lex.h -- the JSON lexing every reader shares: value spans, the SWAR/SSE2
 * string scan, escapes, UTF-8 and number validation, skipping values.
 *
 * Pure C99, header only, no allocation, no Python API.  Every symbol is
 * prefixed cs_ / CS_.  On GCC/Clang with SSE2 (x86-64 baseline) string
 * scanning uses SSE2 intrinsics; define CS_NO_SIMD to force the portable
 * 8-byte SWAR path.  Validation is what orjson does (strict RFC 8259), and
 * conservative: any number whose digit count + |exponent| exceeds 300, and
 * nesting deeper than CS_MAX_DEPTH, are refused (the general path decides).
 */
#ifndef CALLSTITCH_LEX_H
#define CALLSTITCH_LEX_H

#include <stdint.h>
#include <string.h>
#include <stddef.h>

enum { CS_ABSENT = 0, CS_NULL = 1, CS_STR = 2 };   /* span kinds */

/* CS_STR: p/n = raw bytes strictly between the quotes (escapes NOT
 * processed); has_esc = 1 if they contain a backslash. */
typedef struct {
    const unsigned char *p;
    ptrdiff_t n;
    int kind;
    int has_esc;
} cs_span;

#define CS_MAX_DEPTH 64      /* top-level object is depth 1 */

/* ------------------------------------------------------------------------ */
/* low-level helpers                                                         */
/* ------------------------------------------------------------------------ */

#define CS_ONES  0x0101010101010101ULL
#define CS_HIGHS 0x8080808080808080ULL

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) && (defined(__GNUC__) || defined(__clang__))
#define CS_SWAR_LE 1
#endif

/* SSE2 is part of the x86-64 baseline; define CS_NO_SIMD to force the
 * portable 8-byte SWAR path. */
#if !defined(CS_NO_SIMD) && defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define CS_SSE2 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define CS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CS_ALWAYS_INLINE inline __attribute__((always_inline))
#define CS_NOINLINE __attribute__((noinline))
#else
#define CS_ALWAYS_INLINE inline
#define CS_NOINLINE
#define CS_LIKELY(x)   (x)
#define CS_UNLIKELY(x) (x)
#endif

static inline uint64_t cs_load8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether p[0..n) equals lit[0..n).  Where n is a constant of the call site
 * (a literal's length), this unrolls into a few loads instead of a call to
 * memcmp, which compilers do not always inline.  p must have n bytes. */
static CS_ALWAYS_INLINE int cs_same(const unsigned char *p, const char *lit, size_t n)
{
    uint64_t a, b;
    uint32_t x, y;
    size_t i;
    if (n >= 8) {
        for (i = 0; i + 8 <= n; i += 8) {
            memcpy(&a, p + i, 8);
            memcpy(&b, lit + i, 8);
            if (a != b) return 0;
        }
        if (i == n) return 1;
        memcpy(&a, p + n - 8, 8);                   /* the last 8 bytes, overlapping */
        memcpy(&b, lit + n - 8, 8);
        return a == b;
    }
    if (n >= 4) {
        memcpy(&x, p, 4);
        memcpy(&y, lit, 4);
        if (x != y) return 0;
        memcpy(&x, p + n - 4, 4);
        memcpy(&y, lit + n - 4, 4);
        return x == y;
    }
    for (i = 0; i < n; i++)
        if (p[i] != (unsigned char)lit[i]) return 0;
    return 1;
}

/* High bit set in every byte that is '"', '\\', < 0x20 or >= 0x80.  The
 * lowest flagged byte is always a true hit (borrows only propagate upward). */
static inline uint64_t cs_str_special(uint64_t v)
{
    uint64_t q = v ^ (CS_ONES * 0x22);
    uint64_t b = v ^ (CS_ONES * 0x5C);
    uint64_t m = ((q - CS_ONES) & ~q) | ((b - CS_ONES) & ~b) |
                 ((v - CS_ONES * 0x20) & ~v) | v;
    return m & CS_HIGHS;
}

static inline int cs_is_str_special(unsigned c)
{
    return c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

static CS_ALWAYS_INLINE const unsigned char *cs_ws(const unsigned char *p, const unsigned char *e)
{
    while (p < e && *p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static inline int cs_hexv(unsigned c)
{
    if (c - '0' < 10u) return (int)(c - '0');
    c |= 0x20u;
    if (c - 'a' < 6u) return (int)(c - 'a' + 10);
    return -1;
}

/* 4 hex digits -> 0..0xFFFF, or -1 */
static inline int32_t cs_hex4(const unsigned char *p)
{
    int a = cs_hexv(p[0]), b = cs_hexv(p[1]), c = cs_hexv(p[2]), d = cs_hexv(p[3]);
    if ((a | b | c | d) < 0) return -1;
    return (int32_t)((a << 12) | (b << 8) | (c << 4) | d);
}

/* Validate one multi-byte UTF-8 sequence starting at p (p[0] >= 0x80).
 * Returns pointer past it or NULL. RFC 3629. */
static inline const unsigned char *cs_u8seq(const unsigned char *p, const unsigned char *e)
{
    unsigned c = p[0], c1;
    if (c < 0xC2) return NULL;                     /* continuation / overlong C0,C1 */
    if (c < 0xE0) {
        if (e - p < 2 || (p[1] & 0xC0) != 0x80) return NULL;
        return p + 2;
    }
    if (c < 0xF0) {
        if (e - p < 3) return NULL;
        c1 = p[1];
        if ((c1 & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return NULL;
        if (c == 0xE0 && c1 < 0xA0) return NULL;   /* overlong */
        if (c == 0xED && c1 >= 0xA0) return NULL;  /* surrogates */
        return p + 3;
    }
    if (c < 0xF5) {
        if (e - p < 4) return NULL;
        c1 = p[1];
        if ((c1 & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return NULL;
        if (c == 0xF0 && c1 < 0x90) return NULL;   /* overlong */
        if (c == 0xF4 && c1 >= 0x90) return NULL;  /* > U+10FFFF */
        return p + 4;
    }
    return NULL;
}

/* Validate one escape; p at the backslash. Returns pointer past it or NULL.
 * Lone surrogates are rejected. */
static inline const unsigned char *cs_esc(const unsigned char *p, const unsigned char *e)
{
    int32_t u, l;
    if (e - p < 2) return NULL;
    switch (p[1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return p + 2;
    case 'u':
        if (e - p < 6) return NULL;
        u = cs_hex4(p + 2);
        if (u < 0) return NULL;
        if (u < 0xD800 || u > 0xDFFF) return p + 6;
        if (u >= 0xDC00) return NULL;               /* lone low surrogate */
        if (e - p < 12 || p[6] != '\\' || p[7] != 'u') return NULL;
        l = cs_hex4(p + 8);
        if (l < 0xDC00 || l > 0xDFFF) return NULL;
        return p + 12;
    default:
        return NULL;
    }
}

/* Scan string contents. p points just after the opening quote. Returns a
 * pointer to the closing quote, or NULL if invalid/unterminated.
 * Sets *esc = 1 if a backslash escape was seen. */
static CS_NOINLINE const unsigned char *cs_str_slow(const unsigned char *p, const unsigned char *e, int *esc)
{
    unsigned c;
    for (;;) {
        /* find the next byte that is '"', '\\', < 0x20 or >= 0x80 */
#ifdef CS_SSE2
        if (CS_LIKELY(e - p >= 16)) {
            const __m128i vq = _mm_set1_epi8('"');
            const __m128i vb = _mm_set1_epi8('\\');
            const __m128i vc = _mm_set1_epi8(0x20);
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            /* signed compare: bytes >= 0x80 are negative, so also flagged */
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, vq), _mm_cmpeq_epi8(v, vb)),
                                     _mm_cmplt_epi8(v, vc));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            if (mask == 0) { p += 16; continue; }
            p += (unsigned)__builtin_ctz(mask);
        } else
#endif
        if (CS_LIKELY(e - p >= 8)) {
            uint64_t m = cs_str_special(cs_load8(p));
            if (m == 0) { p += 8; continue; }
#ifdef CS_SWAR_LE
            p += (unsigned)__builtin_ctzll(m) >> 3;
#else
            while (!cs_is_str_special(*p)) p++;
#endif
        } else {
            if (p >= e) return NULL;
            if (!cs_is_str_special(*p)) { p++; continue; }
        }
        c = *p;
        if (CS_LIKELY(c == '"')) return p;
        if (c == '\\') {
            p = cs_esc(p, e);
            if (!p) return NULL;
            *esc = 1;
            continue;
        }
        if (c < 0x20) return NULL;
        p = cs_u8seq(p, e);
        if (!p) return NULL;
    }
}

/* Fast path, inlined at every call site: the common case of a string whose
 * closing quote is found in the first 16-byte blocks with no escape, control
 * or non-ASCII byte before it.  Everything else goes to cs_str_slow, which
 * rescans from the current block. */
static CS_ALWAYS_INLINE const unsigned char *cs_str(const unsigned char *p, const unsigned char *e, int *esc)
{
#ifdef CS_SSE2
    const __m128i vq = _mm_set1_epi8('"');
    const __m128i vb = _mm_set1_epi8('\\');
    const __m128i vc = _mm_set1_epi8(0x20);
    while (CS_LIKELY(e - p >= 16)) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned mq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vq)) | 0x10000u;
        /* signed compare: bytes >= 0x80 are negative, so also flagged */
        unsigned ms = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, vb), _mm_cmplt_epi8(v, vc))) | 0x10000u;
        unsigned iq = (unsigned)__builtin_ctz(mq), is = (unsigned)__builtin_ctz(ms);
        if (CS_LIKELY(iq < is)) return p + iq;
        if (is != 16) break;
        p += 16;
    }
#endif
    return cs_str_slow(p, e, esc);
}

/* Validate a JSON number starting at p. Conservative: rejects (NULL) any
 * number whose digits + |exponent| exceed 300, which guarantees the value
 * cannot overflow a double. Does not check the terminator (the caller's
 * grammar check does that). */
static inline const unsigned char *cs_num(const unsigned char *p, const unsigned char *e)
{
    const unsigned char *s;
    ptrdiff_t digits = 0;
    int32_t ev = 0;
    if (p < e && *p == '-') p++;
    if (p >= e) return NULL;
    if (*p == '0') {
        p++;
    } else if ((unsigned)(*p - '1') < 9u) {
        s = p;
        while (p < e && (unsigned)(*p - '0') < 10u) p++;
        digits += p - s;
    } else {
        return NULL;
    }
    if (p < e && *p == '.') {
        p++;
        s = p;
        while (p < e && (unsigned)(*p - '0') < 10u) p++;
        if (p == s) return NULL;
        digits += p - s;
    }
    if (p < e && (*p | 0x20) == 'e') {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        s = p;
        while (p < e && (unsigned)(*p - '0') < 10u) {
            if (ev < 100000) ev = ev * 10 + (int32_t)(*p - '0');
            p++;
        }
        if (p == s) return NULL;
    }
    if (digits + ev > 300) return NULL;
    return p;
}

/* Validate and skip a JSON scalar (string, number, true, false, null) at p:
 * returns pointer past it or NULL. */
static CS_ALWAYS_INLINE const unsigned char *cs_skip_scalar(const unsigned char *p, const unsigned char *e)
{
    int esc = 0;
    switch (*p) {
    case '"':
        p = cs_str(p + 1, e, &esc);
        return p ? p + 1 : NULL;
    case 't':
        return e - p >= 4 && cs_same(p, "true", 4) ? p + 4 : NULL;
    case 'f':
        return e - p >= 5 && cs_same(p, "false", 5) ? p + 5 : NULL;
    case 'n':
        return e - p >= 4 && cs_same(p, "null", 4) ? p + 4 : NULL;
    default:
        return cs_num(p, e);
    }
}

/* Validate and skip an object's key and its colon at p: returns pointer to
 * the value (past whitespace) or NULL. */
static CS_ALWAYS_INLINE const unsigned char *cs_skip_key(const unsigned char *p, const unsigned char *e)
{
    int esc = 0;
    if (p >= e || *p != '"') return NULL;
    p = cs_str(p + 1, e, &esc);
    if (!p) return NULL;
    p = cs_ws(p + 1, e);
    if (p >= e || *p != ':') return NULL;
    return cs_ws(p + 1, e);
}

/* Validate and skip any JSON value starting at p (p already past
 * whitespace). depth = depth of the enclosing container. Returns pointer
 * past the value or NULL. Iterative, explicit container stack. */
static const unsigned char *cs_skip(const unsigned char *p, const unsigned char *e, int depth)
{
    uint64_t stk = 0;   /* bit 0 = innermost open container is an object */
    int d = depth;
value:
    if (p >= e) return NULL;
    if (*p == '{') {
        if (++d > CS_MAX_DEPTH) return NULL;
        p = cs_ws(p + 1, e);
        if (p < e && *p == '}') { p++; d--; goto after; }
        stk = (stk << 1) | 1u;
        goto key;
    }
    if (*p == '[') {
        if (++d > CS_MAX_DEPTH) return NULL;
        p = cs_ws(p + 1, e);
        if (p < e && *p == ']') { p++; d--; goto after; }
        stk <<= 1;
        goto value;
    }
    p = cs_skip_scalar(p, e);
    if (!p) return NULL;
after:
    if (d == depth) return p;
    p = cs_ws(p, e);
    if (p >= e) return NULL;
    if (*p == ',') {
        p = cs_ws(p + 1, e);
        if (stk & 1u) goto key;
        goto value;
    }
    if (*p == ((stk & 1u) ? '}' : ']')) {
        p++;
        stk >>= 1;
        d--;
        goto after;
    }
    return NULL;
key:
    p = cs_skip_key(p, e);
    if (!p) return NULL;
    goto value;
}

/* Skip an uninteresting value; fast path for strings. */
static inline const unsigned char *cs_skipv(const unsigned char *p, const unsigned char *e, int depth)
{
    unsigned c = *p;
    if (c == '"') {
        int esc = 0;
        p = cs_str(p + 1, e, &esc);
        return p ? p + 1 : NULL;
    }
    if (c == 'n') return (e - p >= 4 && cs_same(p, "null", 4)) ? p + 4 : NULL;
    if (c - '0' < 10u || c == '-') return cs_num(p, e);
    return cs_skip(p, e, depth);
}

static inline int cs_is_null(const unsigned char *p, const unsigned char *e)
{
    return e - p >= 4 && cs_same(p, "null", 4);
}

/* string-or-null value into span (must be CS_ABSENT before: duplicate -> NULL) */
static inline const unsigned char *cs_strnull(const unsigned char *p, const unsigned char *e, cs_span *s)
{
    if (s->kind != CS_ABSENT) return NULL;
    if (*p == '"') {
        int esc = 0;
        const unsigned char *q = cs_str(p + 1, e, &esc);
        if (!q) return NULL;
        s->p = p + 1;
        s->n = q - (p + 1);
        s->kind = CS_STR;
        s->has_esc = esc;
        return q + 1;
    }
    if (cs_is_null(p, e)) {
        s->kind = CS_NULL;
        return p + 4;
    }
    return NULL;
}

/* integer fitting int64, no fraction/exponent. Conservative: at most 18
 * digits. */
static inline const unsigned char *cs_int64(const unsigned char *p, const unsigned char *e, int64_t *out)
{
    int neg = 0;
    int64_t v = 0;
    const unsigned char *s;
    if (*p == '-') { neg = 1; p++; }
    if (p >= e) return NULL;
    if (*p == '0') {
        p++;
    } else if ((unsigned)(*p - '1') < 9u) {
        s = p;
        while (p < e && (unsigned)(*p - '0') < 10u) {
            if (p - s >= 18) return NULL;          /* 19+ digits: conservative */
            v = v * 10 + (int64_t)(*p - '0');
            p++;
        }
    } else {
        return NULL;
    }
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return NULL;
    *out = neg ? -v : v;
    return p;
}

static inline void cs_span_clear(cs_span *s)
{
    s->p = NULL; s->n = 0; s->kind = CS_ABSENT; s->has_esc = 0;
}

/* After a member value: whitespace, then ',' (returns 1, p past ws after
 * ','), '}' (returns 0, p past '}'), anything else -> -1. */
static CS_ALWAYS_INLINE int cs_next_member(const unsigned char **pp, const unsigned char *e, unsigned char close)
{
    const unsigned char *p = *pp;
    if (CS_LIKELY(e - p > 1 && p[0] == ',' && p[1] == '"')) { *pp = p + 1; return 1; }
    p = cs_ws(p, e);
    if (p >= e) return -1;
    if (*p == ',') { *pp = cs_ws(p + 1, e); return 1; }
    if (*p == close) { *pp = p + 1; return 0; }
    return -1;
}

#endif /* CALLSTITCH_LEX_H */
