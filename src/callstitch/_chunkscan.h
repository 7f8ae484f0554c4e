/*
 * _chunkscan.h -- validating on-demand reader for one OpenAI-style
 * chat.completion.chunk SSE "data:" payload.
 *
 * cs_scan_chat_chunk() either fully understands the payload (returns 1 and
 * reports where the interesting fields are) or returns 0, meaning "hand it
 * to the general path" (orjson.loads + Python adapter).  When it returns 1
 * the whole document has been validated the way orjson would validate it
 * (strict RFC 8259 grammar, UTF-8, escapes, surrogate pairing, no float
 * overflow) and the reported spans are exactly what the adapter would read.
 * When in doubt it returns 0.
 *
 * Pure C99, header only, no allocation, no Python API.  Every symbol is
 * prefixed cs_ / CS_.
 */
#ifndef CALLSTITCH_CHUNKSCAN_H
#define CALLSTITCH_CHUNKSCAN_H

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

#define CS_MAX_CHOICES 8
#define CS_MAX_FRAGS 32
#define CS_MAX_DEPTH 64      /* top-level object is depth 1 */

typedef struct {
    int has_index; int64_t index;   /* tool call "index"; has_index=0 when absent or null */
    cs_span id, name, args;         /* .id, .function.name, .function.arguments */
} cs_frag;

typedef struct {
    int64_t index;                  /* choices[k].index */
    cs_span content, reasoning_content, reasoning, refusal;   /* from delta */
    cs_span finish_reason;          /* from the choice */
    int first_frag, n_frags;        /* frags[first_frag .. first_frag+n_frags) */
} cs_choice;

typedef struct {
    int n_choices; cs_choice choices[CS_MAX_CHOICES];
    int n_frags;   cs_frag frags[CS_MAX_FRAGS];
} cs_chunk;

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
#else
#define CS_LIKELY(x)   (x)
#define CS_UNLIKELY(x) (x)
#endif

static inline uint64_t cs_load8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
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

static inline const unsigned char *cs_ws(const unsigned char *p, const unsigned char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
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
static inline const unsigned char *cs_str_scan(const unsigned char *p, const unsigned char *e, int *esc)
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

/* ------------------------------------------------------------------------ */
/* stage 1: quote index                                                      */
/* ------------------------------------------------------------------------ */
static inline int cs_utf8_valid(const unsigned char *p, ptrdiff_t n);
/*
 * For documents up to CS_FAST_MAX bytes, one block-wise pass (64 bytes at a
 * time) validates every string's contents globally (no raw control byte
 * inside a string, every escape valid incl. surrogate pairing, UTF-8 of the
 * whole document when it has any non-ASCII byte) and records the positions
 * of all unescaped quotes.  The parser then finds each string's end from
 * that list instead of scanning for it, which removes the long
 * load->compare->ctz dependency chain per string.  Consistency: the parser
 * checks that every string it opens starts at the next recorded quote, and
 * every byte outside strings is examined by the parser itself, so if the
 * parser accepts, its string regions are exactly the recorded quote pairs.
 * Larger documents (or ones with very many quotes) use direct scanning.
 */
#ifndef CS_FAST_MAX
#define CS_FAST_MAX 4096
#endif
#define CS_QCAP 512

typedef struct {
    const unsigned char *base;
    int fast;          /* quote index in use */
    int any_bs;        /* document contains a backslash */
    uint32_t k, nq;    /* next quote / number of quotes */
    uint16_t q[CS_QCAP + 64];
    uint64_t bs[(CS_FAST_MAX + 63) / 64 + 1];
} cs_ctx;

static inline uint64_t cs_prefix_xor(uint64_t x)
{
    x ^= x << 1; x ^= x << 2; x ^= x << 4;
    x ^= x << 8; x ^= x << 16; x ^= x << 32;
    return x;
}

static inline unsigned cs_ctz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while (!(x & 1u)) { x >>= 1; n++; }
    return n;
#endif
}

/* masks for one 64-byte block: quotes, backslashes, bytes < 0x20, bytes >= 0x80 */
static inline void cs_block_masks(const unsigned char *p, uint64_t *qm, uint64_t *bm,
                                  uint64_t *cm, uint64_t *hm)
{
#ifdef CS_SSE2
    const __m128i vq = _mm_set1_epi8('"');
    const __m128i vb = _mm_set1_epi8('\\');
    const __m128i vc = _mm_set1_epi8(0x20);
    __m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)(p));
    __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i v2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i v3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
#define CS_MM4(op, c) \
    ((uint64_t)(unsigned)_mm_movemask_epi8(op(v0, c)) | \
     ((uint64_t)(unsigned)_mm_movemask_epi8(op(v1, c)) << 16) | \
     ((uint64_t)(unsigned)_mm_movemask_epi8(op(v2, c)) << 32) | \
     ((uint64_t)(unsigned)_mm_movemask_epi8(op(v3, c)) << 48))
    uint64_t q = CS_MM4(_mm_cmpeq_epi8, vq);
    uint64_t b = CS_MM4(_mm_cmpeq_epi8, vb);
    uint64_t c = CS_MM4(_mm_cmplt_epi8, vc);
    uint64_t h = (uint64_t)(unsigned)_mm_movemask_epi8(v0) |
                 ((uint64_t)(unsigned)_mm_movemask_epi8(v1) << 16) |
                 ((uint64_t)(unsigned)_mm_movemask_epi8(v2) << 32) |
                 ((uint64_t)(unsigned)_mm_movemask_epi8(v3) << 48);
#undef CS_MM4
    *qm = q; *bm = b; *cm = c & ~h; *hm = h;
#else
    uint64_t q = 0, b = 0, c = 0, h = 0;
    int i;
    for (i = 0; i < 64; i++) {
        unsigned x = p[i];
        q |= (uint64_t)(x == '"') << i;
        b |= (uint64_t)(x == '\\') << i;
        c |= (uint64_t)(x < 0x20) << i;
        h |= (uint64_t)(x >= 0x80) << i;
    }
    *qm = q; *bm = b; *cm = c; *hm = h;
#endif
}

/* Returns 1 = index built (cx->fast=1), 0 = document invalid,
 * 2 = use direct scanning (cx->fast=0). */
static inline int cs_index(cs_ctx *cx, const unsigned char *p, ptrdiff_t n)
{
    const unsigned char *e = p + n;
    uint64_t prev_in = 0, esc_carry = 0, bad = 0, any_h = 0, any_b = 0;
    ptrdiff_t skip_until = 0, off;
    uint32_t nq = 0;
    unsigned char tail[64];
    cx->base = p;
    cx->k = 0;
    cx->fast = 0;
    if (n > CS_FAST_MAX) return 2;
    for (off = 0; off < n; off += 64) {
        uint64_t qm, bm, cm, hm, escaped, inside;
        if (n - off >= 64) {
            cs_block_masks(p + off, &qm, &bm, &cm, &hm);
        } else {
            memset(tail, ' ', 64);
            memcpy(tail, p + off, (size_t)(n - off));
            cs_block_masks(tail, &qm, &bm, &cm, &hm);
        }
        cx->bs[off >> 6] = bm;
        any_h |= hm;
        any_b |= bm;
        escaped = esc_carry;
        esc_carry = 0;
        if (CS_UNLIKELY(bm != 0)) {
            uint64_t t = bm;
            while (t) {
                unsigned i = cs_ctz64(t);
                ptrdiff_t pos = off + (ptrdiff_t)i;
                const unsigned char *x;
                t &= t - 1;
                if (pos < skip_until) continue;   /* part of the previous escape */
                x = cs_esc(p + pos, e);
                if (!x) return 0;                 /* bad escape, or '\' outside a string */
                skip_until = x - p;
                if (i < 63) escaped |= (uint64_t)1 << (i + 1);
                else esc_carry = 1;
            }
        }
        qm &= ~escaped;
        inside = cs_prefix_xor(qm) ^ prev_in;
        prev_in = (uint64_t)0 - (inside >> 63);
        bad |= cm & inside;
        if (qm) {
            uint16_t *dst;
            if (nq + 64 > CS_QCAP) return 2;
            dst = cx->q + nq;
            do {
                *dst++ = (uint16_t)(off + (ptrdiff_t)cs_ctz64(qm));
                qm &= qm - 1;
            } while (qm);
            nq = (uint32_t)(dst - cx->q);
        }
    }
    if (prev_in || bad) return 0;
    if (any_h && !cs_utf8_valid(p, n)) return 0;
    cx->nq = nq;
    cx->any_bs = any_b != 0;
    cx->fast = 1;
    return 1;
}

/* any bit set in bitmap positions [a, b) */
static inline int cs_bits_any(const uint64_t *bits, ptrdiff_t a, ptrdiff_t b)
{
    ptrdiff_t wa, wb, w;
    uint64_t first;
    if (a >= b) return 0;
    wa = a >> 6;
    wb = (b - 1) >> 6;
    first = bits[wa] >> (a & 63);
    if (wa == wb) {
        ptrdiff_t len = b - a;
        uint64_t m = len >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1);
        return (first & m) != 0;
    }
    if (first) return 1;
    for (w = wa + 1; w < wb; w++)
        if (bits[w]) return 1;
    return (bits[wb] << (63 - ((b - 1) & 63))) != 0;
}

/* String at p (just after the opening quote): returns a pointer to the
 * closing quote or NULL. If esc is non-NULL, sets *esc=1 when the contents
 * hold a backslash. */
static inline const unsigned char *cs_str(cs_ctx *cx, const unsigned char *p, const unsigned char *e, int *esc)
{
    if (CS_LIKELY(cx->fast)) {
        uint32_t k = cx->k;
        ptrdiff_t a = (p - 1) - cx->base, b;
        if (CS_UNLIKELY(k + 2 > cx->nq || (ptrdiff_t)cx->q[k] != a)) return NULL;
        b = (ptrdiff_t)cx->q[k + 1];
        cx->k = k + 2;
        if (esc && cx->any_bs && cs_bits_any(cx->bs, a + 1, b)) *esc = 1;
        return cx->base + b;
    } else {
        int dummy = 0;
        return cs_str_scan(p, e, esc ? esc : &dummy);
    }
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

/* Validate and skip any JSON value starting at p (p already past
 * whitespace). depth = depth of the enclosing container. Returns pointer
 * past the value or NULL. Iterative, explicit container stack. */
static const unsigned char *cs_skip(cs_ctx *cx, const unsigned char *p, const unsigned char *e, int depth)
{
    uint64_t stk = 0;   /* bit 0 = innermost open container is an object */
    int d = depth;
    int esc;
value:
    if (p >= e) return NULL;
    switch (*p) {
    case '"':
        esc = 0;
        p = cs_str(cx, p + 1, e, NULL);
        if (!p) return NULL;
        p++;
        break;
    case '{':
        if (++d > CS_MAX_DEPTH) return NULL;
        p = cs_ws(p + 1, e);
        if (p < e && *p == '}') { p++; d--; break; }
        stk = (stk << 1) | 1u;
        goto key;
    case '[':
        if (++d > CS_MAX_DEPTH) return NULL;
        p = cs_ws(p + 1, e);
        if (p < e && *p == ']') { p++; d--; break; }
        stk <<= 1;
        goto value;
    case 't':
        if (e - p < 4 || memcmp(p, "true", 4) != 0) return NULL;
        p += 4;
        break;
    case 'f':
        if (e - p < 5 || memcmp(p, "false", 5) != 0) return NULL;
        p += 5;
        break;
    case 'n':
        if (e - p < 4 || memcmp(p, "null", 4) != 0) return NULL;
        p += 4;
        break;
    default:
        p = cs_num(p, e);
        if (!p) return NULL;
        break;
    }
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
    if (p >= e || *p != '"') return NULL;
    esc = 0;
    p = cs_str(cx, p + 1, e, NULL);
    if (!p) return NULL;
    p = cs_ws(p + 1, e);
    if (p >= e || *p != ':') return NULL;
    p = cs_ws(p + 1, e);
    goto value;
}

/* Skip an uninteresting value; fast path for strings. */
static inline const unsigned char *cs_skipv(cs_ctx *cx, const unsigned char *p, const unsigned char *e, int depth)
{
    if (*p == '"') {
        int esc = 0;
        p = cs_str(cx, p + 1, e, NULL);
        return p ? p + 1 : NULL;
    }
    return cs_skip(cx, p, e, depth);
}

static inline int cs_is_null(const unsigned char *p, const unsigned char *e)
{
    return e - p >= 4 && memcmp(p, "null", 4) == 0;
}

/* string-or-null value into span (must be CS_ABSENT before: duplicate -> NULL) */
static inline const unsigned char *cs_strnull(cs_ctx *cx, const unsigned char *p, const unsigned char *e, cs_span *s)
{
    if (s->kind != CS_ABSENT) return NULL;
    if (*p == '"') {
        int esc = 0;
        const unsigned char *q = cs_str(cx, p + 1, e, &esc);
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
static inline int cs_next_member(const unsigned char **pp, const unsigned char *e, unsigned char close)
{
    const unsigned char *p = cs_ws(*pp, e);
    if (p >= e) return -1;
    if (*p == ',') { *pp = cs_ws(p + 1, e); return 1; }
    if (*p == close) { *pp = p + 1; return 0; }
    return -1;
}

/* Read an object key at p (must be '"'); key must be escape-free.
 * On success (*k, *kn) = key bytes and returns pointer past ws and ':' and ws
 * (at the value, guaranteed p < e). */
static inline const unsigned char *cs_key(cs_ctx *cx, const unsigned char *p, const unsigned char *e,
                                          const unsigned char **k, ptrdiff_t *kn)
{
    int esc = 0;
    const unsigned char *q;
    if (p >= e || *p != '"') return NULL;
    q = cs_str(cx, p + 1, e, &esc);
    if (!q || esc) return NULL;
    *k = p + 1;
    *kn = q - (p + 1);
    p = cs_ws(q + 1, e);
    if (p >= e || *p != ':') return NULL;
    p = cs_ws(p + 1, e);
    if (p >= e) return NULL;
    return p;
}

#define CS_KEYEQ(k, kn, lit) ((kn) == (ptrdiff_t)(sizeof(lit) - 1) && memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* ------------------------------------------------------------------------ */
/* structured readers                                                        */
/* ------------------------------------------------------------------------ */

/* function object (depth 7); p at '{' */
static inline const unsigned char *cs_function(cs_ctx *cx, const unsigned char *p, const unsigned char *e, cs_frag *f)
{
    const unsigned char *k;
    ptrdiff_t kn;
    int r;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(cx, p, e, &k, &kn);
        if (!p) return NULL;
        if (CS_KEYEQ(k, kn, "arguments")) p = cs_strnull(cx, p, e, &f->args);
        else if (CS_KEYEQ(k, kn, "name")) p = cs_strnull(cx, p, e, &f->name);
        else p = cs_skipv(cx, p, e, 7);
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* tool call object (depth 6); p at '{' */
static inline const unsigned char *cs_call(cs_ctx *cx, const unsigned char *p, const unsigned char *e, cs_frag *f)
{
    const unsigned char *k;
    ptrdiff_t kn;
    int r;
    unsigned seen = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(cx, p, e, &k, &kn);
        if (!p) return NULL;
        if (CS_KEYEQ(k, kn, "index")) {
            if (seen & 1u) return NULL;
            seen |= 1u;
            if (*p == 'n') {
                if (!cs_is_null(p, e)) return NULL;
                p += 4;
            } else {
                p = cs_int64(p, e, &f->index);
                f->has_index = 1;
            }
        } else if (CS_KEYEQ(k, kn, "function")) {
            if (seen & 2u) return NULL;
            seen |= 2u;
            if (*p == '{') p = cs_function(cx, p, e, f);
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
        } else if (CS_KEYEQ(k, kn, "id")) {
            p = cs_strnull(cx, p, e, &f->id);
        } else {
            p = cs_skipv(cx, p, e, 6);
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* tool_calls array (depth 5); p at '[' */
static inline const unsigned char *cs_tool_calls(cs_ctx *cx, const unsigned char *p, const unsigned char *e,
                                                 cs_chunk *out, cs_choice *ch)
{
    int r;
    p = cs_ws(p + 1, e);
    if (p < e && *p == ']') return p + 1;
    for (;;) {
        cs_frag *f;
        if (p >= e || *p != '{') return NULL;
        if (out->n_frags >= CS_MAX_FRAGS) return NULL;
        f = &out->frags[out->n_frags++];
        ch->n_frags++;
        f->has_index = 0;
        f->index = 0;
        cs_span_clear(&f->id);
        cs_span_clear(&f->name);
        cs_span_clear(&f->args);
        p = cs_call(cx, p, e, f);
        if (!p) return NULL;
        r = cs_next_member(&p, e, ']');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* delta object (depth 4); p at '{' */
static inline const unsigned char *cs_delta(cs_ctx *cx, const unsigned char *p, const unsigned char *e,
                                            cs_chunk *out, cs_choice *ch)
{
    const unsigned char *k;
    ptrdiff_t kn;
    int r;
    int seen_tc = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(cx, p, e, &k, &kn);
        if (!p) return NULL;
        switch (kn) {
        case 7:
            if (memcmp(k, "content", 7) == 0) { p = cs_strnull(cx, p, e, &ch->content); break; }
            if (memcmp(k, "refusal", 7) == 0) { p = cs_strnull(cx, p, e, &ch->refusal); break; }
            p = cs_skipv(cx, p, e, 4);
            break;
        case 9:
            if (memcmp(k, "reasoning", 9) == 0) { p = cs_strnull(cx, p, e, &ch->reasoning); break; }
            p = cs_skipv(cx, p, e, 4);
            break;
        case 10:
            if (memcmp(k, "tool_calls", 10) == 0) {
                if (seen_tc) return NULL;
                seen_tc = 1;
                if (*p == '[') p = cs_tool_calls(cx, p, e, out, ch);
                else if (cs_is_null(p, e)) p += 4;
                else return NULL;
                break;
            }
            p = cs_skipv(cx, p, e, 4);
            break;
        case 13:
            if (memcmp(k, "function_call", 13) == 0) return NULL;
            p = cs_skipv(cx, p, e, 4);
            break;
        case 17:
            if (memcmp(k, "reasoning_content", 17) == 0) { p = cs_strnull(cx, p, e, &ch->reasoning_content); break; }
            p = cs_skipv(cx, p, e, 4);
            break;
        default:
            p = cs_skipv(cx, p, e, 4);
            break;
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* choice object (depth 3); p at '{' */
static inline const unsigned char *cs_choice_obj(cs_ctx *cx, const unsigned char *p, const unsigned char *e,
                                                 cs_chunk *out, cs_choice *ch)
{
    const unsigned char *k;
    ptrdiff_t kn;
    int r;
    unsigned seen = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return NULL;   /* no "index" */
    for (;;) {
        p = cs_key(cx, p, e, &k, &kn);
        if (!p) return NULL;
        if (kn == 5 && memcmp(k, "index", 5) == 0) {
            if (seen & 1u) return NULL;
            seen |= 1u;
            p = cs_int64(p, e, &ch->index);   /* null -> fails */
        } else if (kn == 5 && memcmp(k, "delta", 5) == 0) {
            if (seen & 2u) return NULL;
            seen |= 2u;
            if (*p == '{') p = cs_delta(cx, p, e, out, ch);
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
        } else if (kn == 13 && memcmp(k, "finish_reason", 13) == 0) {
            p = cs_strnull(cx, p, e, &ch->finish_reason);
        } else if (kn == 7 && memcmp(k, "message", 7) == 0) {
            return NULL;
        } else {
            p = cs_skipv(cx, p, e, 3);
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) break;
    }
    if (!(seen & 1u)) return NULL;
    return p;
}

/* choices array (depth 2); p at '[' */
static inline const unsigned char *cs_choices(cs_ctx *cx, const unsigned char *p, const unsigned char *e, cs_chunk *out)
{
    int r;
    p = cs_ws(p + 1, e);
    if (p < e && *p == ']') return p + 1;
    for (;;) {
        cs_choice *ch;
        if (p >= e || *p != '{') return NULL;
        if (out->n_choices >= CS_MAX_CHOICES) return NULL;
        ch = &out->choices[out->n_choices++];
        ch->index = 0;
        cs_span_clear(&ch->content);
        cs_span_clear(&ch->reasoning_content);
        cs_span_clear(&ch->reasoning);
        cs_span_clear(&ch->refusal);
        cs_span_clear(&ch->finish_reason);
        ch->first_frag = out->n_frags;
        ch->n_frags = 0;
        p = cs_choice_obj(cx, p, e, out, ch);
        if (!p) return NULL;
        r = cs_next_member(&p, e, ']');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* ------------------------------------------------------------------------ */
/* public API                                                                */
/* ------------------------------------------------------------------------ */

/* 1 = understood (out filled), 0 = hand to the general path. */
static inline int cs_scan_chat_chunk(const unsigned char *p, ptrdiff_t n, cs_chunk *out)
{
    const unsigned char *e = p + n;
    const unsigned char *k;
    ptrdiff_t kn;
    int r;
    unsigned seen = 0;

    cs_ctx ctx, *cx = &ctx;

    out->n_choices = 0;
    out->n_frags = 0;
    if (!p || n <= 0) return 0;
    if (!cs_index(cx, p, n)) return 0;
    p = cs_ws(p, e);
    if (p >= e || *p != '{') return 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    } else {
        for (;;) {
            p = cs_key(cx, p, e, &k, &kn);
            if (!p) return 0;
            if (kn == 7 && memcmp(k, "choices", 7) == 0) {
                if (seen & 1u) return 0;
                seen |= 1u;
                if (*p == '[') p = cs_choices(cx, p, e, out);
                else if (cs_is_null(p, e)) p += 4;
                else return 0;
            } else if (kn == 5 && memcmp(k, "usage", 5) == 0) {
                if (seen & 2u) return 0;
                seen |= 2u;
                if (!cs_is_null(p, e)) return 0;
                p += 4;
            } else if (kn == 5 && memcmp(k, "error", 5) == 0) {
                if (seen & 4u) return 0;
                seen |= 4u;
                if (!cs_is_null(p, e)) return 0;
                p += 4;
            } else {
                p = cs_skipv(cx, p, e, 1);
            }
            if (!p) return 0;
            r = cs_next_member(&p, e, '}');
            if (r < 0) return 0;
            if (r == 0) break;
        }
    }
    p = cs_ws(p, e);
    if (p != e) return 0;
    return 1;
}

/* Decode a CS_STR span's JSON escapes to UTF-8 into dst (needs n bytes of
 * room; output never longer than input). Returns bytes written. Only for
 * spans accepted by cs_scan_chat_chunk (escapes assumed valid). */
static inline ptrdiff_t cs_unescape(const unsigned char *p, ptrdiff_t n, unsigned char *dst)
{
    const unsigned char *e = p + n;
    unsigned char *d = dst;
    while (p < e) {
        const unsigned char *bs = (const unsigned char *)memchr(p, '\\', (size_t)(e - p));
        uint32_t u;
        if (!bs) {
            memcpy(d, p, (size_t)(e - p));
            d += e - p;
            break;
        }
        if (bs != p) {
            memcpy(d, p, (size_t)(bs - p));
            d += bs - p;
        }
        p = bs;
        if (e - p < 2) break;   /* cannot happen for validated spans */
        switch (p[1]) {
        case '"':  *d++ = '"';  p += 2; continue;
        case '\\': *d++ = '\\'; p += 2; continue;
        case '/':  *d++ = '/';  p += 2; continue;
        case 'b':  *d++ = '\b'; p += 2; continue;
        case 'f':  *d++ = '\f'; p += 2; continue;
        case 'n':  *d++ = '\n'; p += 2; continue;
        case 'r':  *d++ = '\r'; p += 2; continue;
        case 't':  *d++ = '\t'; p += 2; continue;
        case 'u':  break;
        default:   p += 2; continue;   /* cannot happen for validated spans */
        }
        if (e - p < 6) break;
        u = (uint32_t)cs_hex4(p + 2);
        p += 6;
        if (u >= 0xD800 && u < 0xDC00 && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            uint32_t l = (uint32_t)cs_hex4(p + 2);
            if (l >= 0xDC00 && l <= 0xDFFF) {
                u = 0x10000u + ((u - 0xD800u) << 10) + (l - 0xDC00u);
                p += 6;
            }
        }
        if (u < 0x80) {
            *d++ = (unsigned char)u;
        } else if (u < 0x800) {
            *d++ = (unsigned char)(0xC0 | (u >> 6));
            *d++ = (unsigned char)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            *d++ = (unsigned char)(0xE0 | (u >> 12));
            *d++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
            *d++ = (unsigned char)(0x80 | (u & 0x3F));
        } else {
            *d++ = (unsigned char)(0xF0 | (u >> 18));
            *d++ = (unsigned char)(0x80 | ((u >> 12) & 0x3F));
            *d++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
            *d++ = (unsigned char)(0x80 | (u & 0x3F));
        }
    }
    return d - dst;
}

/* 1 if p[0..n) is valid UTF-8 (RFC 3629), else 0. */
static inline int cs_utf8_valid(const unsigned char *p, ptrdiff_t n)
{
    const unsigned char *e = p + n;
    while (p < e) {
        if (e - p >= 8 && (cs_load8(p) & CS_HIGHS) == 0) { p += 8; continue; }
        if (*p < 0x80) { p++; continue; }
        p = cs_u8seq(p, e);
        if (!p) return 0;
    }
    return 1;
}

#endif /* CALLSTITCH_CHUNKSCAN_H */
