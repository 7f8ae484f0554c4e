/*
 * chunkscan.h -- validating on-demand reader for one OpenAI-style
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
 * Pure C99, header only, no allocation, no recursion beyond the fixed chunk
 * structure, no Python API.  Every symbol is prefixed cs_ / CS_.  On
 * GCC/Clang with SSE2 (x86-64 baseline) string scanning uses SSE2
 * intrinsics; define CS_NO_SIMD to force the portable 8-byte SWAR path.
 *
 * Deliberately conservative (returns 0 although orjson would accept):
 *   - any key containing a backslash in an object whose keys are
 *     interpreted (top level, choice, delta, tool call, function);
 *   - any number whose digit count + |exponent| exceeds 300;
 *   - an "index" with 19 or more digits;
 *   - nesting deeper than 64 (top-level object = depth 1).
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

/* Validate and skip any JSON value starting at p (p already past
 * whitespace). depth = depth of the enclosing container. Returns pointer
 * past the value or NULL. Iterative, explicit container stack. */
static const unsigned char *cs_skip(const unsigned char *p, const unsigned char *e, int depth)
{
    uint64_t stk = 0;   /* bit 0 = innermost open container is an object */
    int d = depth;
    int esc;
value:
    if (p >= e) return NULL;
    switch (*p) {
    case '"':
        esc = 0;
        p = cs_str(p + 1, e, &esc);
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
        if (e - p < 4 || !cs_same(p, "true", 4)) return NULL;
        p += 4;
        break;
    case 'f':
        if (e - p < 5 || !cs_same(p, "false", 5)) return NULL;
        p += 5;
        break;
    case 'n':
        if (e - p < 4 || !cs_same(p, "null", 4)) return NULL;
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
    p = cs_str(p + 1, e, &esc);
    if (!p) return NULL;
    p = cs_ws(p + 1, e);
    if (p >= e || *p != ':') return NULL;
    p = cs_ws(p + 1, e);
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

/* ------------------------------------------------------------------------ */
/* object keys                                                               */
/* ------------------------------------------------------------------------ */

/* Key ids. Names are context free; each object reader maps the ones it
 * interprets and skips the rest. CS_K_OTHER = any other key (skipped). */
enum {
    CS_K_OTHER = 0, CS_K_CHOICES, CS_K_USAGE, CS_K_ERROR, CS_K_INDEX, CS_K_DELTA,
    CS_K_FINISH, CS_K_MESSAGE, CS_K_CONTENT, CS_K_RCONTENT, CS_K_REASONING,
    CS_K_REFUSAL, CS_K_TOOLCALLS, CS_K_FCALL, CS_K_ID, CS_K_FUNCTION, CS_K_NAME,
    CS_K_ARGS, CS_K_CUSTOM, CS_K_TYPE, CS_K_BAD = -1
};

/* Classify an escape-free key by its raw bytes. */
static inline int cs_key_id(const unsigned char *k, ptrdiff_t kn)
{
#define CS_KEYIS(lit) cs_same(k, lit, sizeof(lit) - 1)
    switch (kn) {
    case 2:  return CS_KEYIS("id") ? CS_K_ID : CS_K_OTHER;
    case 4:
        if (CS_KEYIS("name")) return CS_K_NAME;
        if (CS_KEYIS("type")) return CS_K_TYPE;
        return CS_K_OTHER;
    case 5:
        if (CS_KEYIS("index")) return CS_K_INDEX;
        if (CS_KEYIS("delta")) return CS_K_DELTA;
        if (CS_KEYIS("usage")) return CS_K_USAGE;
        if (CS_KEYIS("error")) return CS_K_ERROR;
        return CS_K_OTHER;
    case 6:  return CS_KEYIS("custom") ? CS_K_CUSTOM : CS_K_OTHER;
    case 7:
        if (CS_KEYIS("choices")) return CS_K_CHOICES;
        if (CS_KEYIS("content")) return CS_K_CONTENT;
        if (CS_KEYIS("refusal")) return CS_K_REFUSAL;
        if (CS_KEYIS("message")) return CS_K_MESSAGE;
        return CS_K_OTHER;
    case 8:  return CS_KEYIS("function") ? CS_K_FUNCTION : CS_K_OTHER;
    case 9:
        if (CS_KEYIS("arguments")) return CS_K_ARGS;
        if (CS_KEYIS("reasoning")) return CS_K_REASONING;
        return CS_K_OTHER;
    case 10: return CS_KEYIS("tool_calls") ? CS_K_TOOLCALLS : CS_K_OTHER;
    case 13:
        if (CS_KEYIS("finish_reason")) return CS_K_FINISH;
        if (CS_KEYIS("function_call")) return CS_K_FCALL;
        return CS_K_OTHER;
    case 17: return CS_KEYIS("reasoning_content") ? CS_K_RCONTENT : CS_K_OTHER;
    default: return CS_K_OTHER;
    }
#undef CS_KEYIS
}

/* After a key's closing quote q: skip the ':' and the whitespace around it; return the value's
 * first byte, or NULL when there is no ':' or no value. */
static CS_ALWAYS_INLINE const unsigned char *cs_after_key(const unsigned char *q, const unsigned char *e)
{
    const unsigned char *p;
    if (CS_LIKELY(e - q > 2 && q[1] == ':' && q[2] > ' ')) return q + 2;
    p = cs_ws(q + 1, e);
    if (p >= e || *p != ':') return NULL;
    p = cs_ws(p + 1, e);
    if (p >= e) return NULL;
    return p;
}

/* Read an object key at p (must be '"') and the following ':'.
 * Returns a pointer to the value (p < e guaranteed) and sets *id, or NULL.
 * A key containing a backslash gives *id = CS_K_BAD (the caller, which
 * interprets keys, then falls back).
 *
 * Fast path: the bytes are compared against the literal spellings of the
 * keys that occur in chat.completion.chunk payloads, including the closing
 * quote. A literal match proves the key is exactly that escape-free string,
 * and the key's end is then known without scanning for it (this removes a
 * data-dependent load->search->pointer chain per key). Anything else is
 * scanned and classified normally, so the literal list only affects speed. */
static CS_ALWAYS_INLINE const unsigned char *cs_key(const unsigned char *p, const unsigned char *e, int *id)
{
    const unsigned char *q = NULL;
    int esc = 0;
    if (p >= e || *p != '"') return NULL;
    if (CS_LIKELY(e - p >= 24)) {
#define CS_LIT(lit, kid) \
    if (cs_same(p + 1, lit "\"", sizeof(lit))) { q = p + sizeof(lit); *id = kid; goto have; }
        switch (p[1]) {
        case 'a': CS_LIT("arguments", CS_K_ARGS); break;
        case 'c': CS_LIT("content", CS_K_CONTENT); CS_LIT("choices", CS_K_CHOICES);
                  CS_LIT("created", CS_K_OTHER); break;
        case 'd': CS_LIT("delta", CS_K_DELTA); break;
        case 'e': CS_LIT("error", CS_K_ERROR); break;
        case 'f': CS_LIT("function", CS_K_FUNCTION); CS_LIT("finish_reason", CS_K_FINISH);
                  CS_LIT("function_call", CS_K_FCALL); break;
        case 'i': CS_LIT("index", CS_K_INDEX); CS_LIT("id", CS_K_ID); break;
        case 'l': CS_LIT("logprobs", CS_K_OTHER); break;
        case 'm': CS_LIT("model", CS_K_OTHER); CS_LIT("message", CS_K_MESSAGE); break;
        case 'n': CS_LIT("name", CS_K_NAME); break;
        case 'o': CS_LIT("object", CS_K_OTHER); CS_LIT("obfuscation", CS_K_OTHER); break;
        case 'r': CS_LIT("role", CS_K_OTHER); CS_LIT("reasoning_content", CS_K_RCONTENT);
                  CS_LIT("reasoning", CS_K_REASONING); CS_LIT("refusal", CS_K_REFUSAL); break;
        case 's': CS_LIT("system_fingerprint", CS_K_OTHER); CS_LIT("service_tier", CS_K_OTHER); break;
        case 't': CS_LIT("tool_calls", CS_K_TOOLCALLS); CS_LIT("type", CS_K_TYPE); break;
        case 'u': CS_LIT("usage", CS_K_USAGE); break;
        default: break;
        }
#undef CS_LIT
    }
    q = cs_str(p + 1, e, &esc);
    if (!q) return NULL;
    *id = esc ? CS_K_BAD : cs_key_id(p + 1, q - (p + 1));
have:
    return cs_after_key(q, e);
}

/* ------------------------------------------------------------------------ */
/* structured readers                                                        */
/* ------------------------------------------------------------------------ */

/* function object (depth 7); p at '{' */
static inline const unsigned char *cs_function(const unsigned char *p, const unsigned char *e, cs_frag *f)
{
    int id, r;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(p, e, &id);
        if (!p) return NULL;
        switch (id) {
        case CS_K_ARGS: p = cs_strnull(p, e, &f->args); break;
        case CS_K_NAME: p = cs_strnull(p, e, &f->name); break;
        case CS_K_BAD:  return NULL;
        default:        p = cs_skipv(p, e, 7); break;
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* tool call object (depth 6); p at '{' */
static inline const unsigned char *cs_call(const unsigned char *p, const unsigned char *e, cs_frag *f)
{
    int id, r;
    unsigned seen = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(p, e, &id);
        if (!p) return NULL;
        switch (id) {
        case CS_K_INDEX:
            if (seen & 1u) return NULL;
            seen |= 1u;
            if (*p == 'n') {
                if (!cs_is_null(p, e)) return NULL;
                p += 4;
            } else {
                p = cs_int64(p, e, &f->index);
                f->has_index = 1;
            }
            break;
        case CS_K_FUNCTION:
            if (seen & 2u) return NULL;
            seen |= 2u;
            if (*p == '{') p = cs_function(p, e, f);
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
            break;
        case CS_K_ID:
            p = cs_strnull(p, e, &f->id);
            break;
        case CS_K_TYPE:
            /* "function" (or null) as OpenAI sends it; a custom (free-form) call, or any other
             * type, is the general path's to read. */
            if (e - p >= 10 && cs_same(p, "\"function\"", 10)) p += 10;
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
            break;
        case CS_K_CUSTOM:
        case CS_K_BAD:
            return NULL;
        default:
            p = cs_skipv(p, e, 6);
            break;
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* tool_calls array (depth 5); p at '[' */
static inline const unsigned char *cs_tool_calls(const unsigned char *p, const unsigned char *e,
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
        p = cs_call(p, e, f);
        if (!p) return NULL;
        r = cs_next_member(&p, e, ']');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* delta object (depth 4); p at '{' */
static inline const unsigned char *cs_delta(const unsigned char *p, const unsigned char *e,
                                            cs_chunk *out, cs_choice *ch)
{
    int id, r;
    int seen_tc = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = cs_key(p, e, &id);
        if (!p) return NULL;
        switch (id) {
        case CS_K_CONTENT:   p = cs_strnull(p, e, &ch->content); break;
        case CS_K_RCONTENT:  p = cs_strnull(p, e, &ch->reasoning_content); break;
        case CS_K_REASONING: p = cs_strnull(p, e, &ch->reasoning); break;
        case CS_K_REFUSAL:   p = cs_strnull(p, e, &ch->refusal); break;
        case CS_K_TOOLCALLS:
            if (seen_tc) return NULL;
            seen_tc = 1;
            if (*p == '[') p = cs_tool_calls(p, e, out, ch);
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
            break;
        case CS_K_FCALL:
        case CS_K_BAD:
            return NULL;
        default:
            p = cs_skipv(p, e, 4);
            break;
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) return p;
    }
}

/* choice object (depth 3); p at '{' */
static inline const unsigned char *cs_choice_obj(const unsigned char *p, const unsigned char *e,
                                                 cs_chunk *out, cs_choice *ch)
{
    int id, r;
    unsigned seen = 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') return NULL;   /* no "index" */
    for (;;) {
        p = cs_key(p, e, &id);
        if (!p) return NULL;
        switch (id) {
        case CS_K_INDEX:
            if (seen & 1u) return NULL;
            seen |= 1u;
            p = cs_int64(p, e, &ch->index);   /* null -> fails */
            break;
        case CS_K_DELTA:
            if (seen & 2u) return NULL;
            seen |= 2u;
            if (*p == '{') { p = cs_delta(p, e, out, ch); seen |= 8u; }
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
            break;
        case CS_K_FINISH:
            p = cs_strnull(p, e, &ch->finish_reason);
            break;
        case CS_K_MESSAGE:
            /* Beside a delta, a message repeats it (some servers send both): skipped. Without
             * one, the message is the content: the general path reads it. */
            seen |= 4u;
            p = cs_skipv(p, e, 3);
            break;
        case CS_K_BAD:
            return NULL;
        default:
            p = cs_skipv(p, e, 3);
            break;
        }
        if (!p) return NULL;
        r = cs_next_member(&p, e, '}');
        if (r < 0) return NULL;
        if (r == 0) break;
    }
    if (!(seen & 1u)) return NULL;
    if ((seen & 4u) && !(seen & 8u)) return NULL;   /* a message and no delta object */
    return p;
}

/* choices array (depth 2); p at '[' */
static inline const unsigned char *cs_choices(const unsigned char *p, const unsigned char *e, cs_chunk *out)
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
        p = cs_choice_obj(p, e, out, ch);
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
    int id, r;
    unsigned seen = 0;

    out->n_choices = 0;
    out->n_frags = 0;
    if (!p || n <= 0) return 0;
    p = cs_ws(p, e);
    if (p >= e || *p != '{') return 0;
    p = cs_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    } else {
        for (;;) {
            p = cs_key(p, e, &id);
            if (!p) return 0;
            switch (id) {
            case CS_K_CHOICES:
                if (seen & 1u) return 0;
                seen |= 1u;
                if (*p == '[') p = cs_choices(p, e, out);
                else if (cs_is_null(p, e)) p += 4;
                else return 0;
                break;
            case CS_K_USAGE:
                if (seen & 2u) return 0;
                seen |= 2u;
                if (!cs_is_null(p, e)) return 0;
                p += 4;
                break;
            case CS_K_ERROR:
                if (seen & 4u) return 0;
                seen |= 4u;
                if (!cs_is_null(p, e)) return 0;
                p += 4;
                break;
            case CS_K_BAD:
                return 0;
            default:
                p = cs_skipv(p, e, 1);
                break;
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

/* The first '"' or '\\' in p[0..e), or e when there is none. */
static CS_ALWAYS_INLINE const unsigned char *cs_quote_or_backslash(const unsigned char *p, const unsigned char *e)
{
#ifdef CS_SSE2
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                              _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
        if (m) return p + (unsigned)__builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < e && *p != '"' && *p != '\\') p++;
    return p;
}

/* The closing quote of a string whose text starts at p, found without
 * checking the text (escapes are only stepped over): for values that orjson
 * parses next, which checks them.  NULL when the data ends first. */
static inline const unsigned char *cs_str_end_loose(const unsigned char *p, const unsigned char *e)
{
    for (;;) {
        p = cs_quote_or_backslash(p, e);
        if (p >= e) return NULL;
        if (*p == '"') return p;
        p += 2;                                    /* a backslash and the byte it escapes */
        if (p > e) return NULL;
    }
}

/* The end of the object or array at p ('{' or '['), found by counting
 * brackets outside strings, without checking anything else: orjson parses
 * the span next and refuses what is not JSON.  NULL when the data ends first,
 * or nests deeper than CS_LOOSE_DEPTH (well within orjson's own limit, which
 * counts from the line's top, so that the span parses alone only if the line
 * would). */
#define CS_LOOSE_DEPTH 512
static inline const unsigned char *cs_skip_loose(const unsigned char *p, const unsigned char *e)
{
    ptrdiff_t depth = 0;
    for (; p < e; p++) {
        switch (*p) {
        case '"':
            p = cs_str_end_loose(p + 1, e);
            if (!p) return NULL;
            break;
        case '{': case '[':
            if (++depth > CS_LOOSE_DEPTH) return NULL;
            break;
        case '}': case ']':
            if (--depth == 0) return p + 1;
            break;
        default:
            break;
        }
    }
    return NULL;
}

/* One entry of an Ollama line's message.tool_calls, as cs_ollama_line finds it. */
typedef struct {
    cs_span id;                        /* CS_ABSENT when the entry has none */
    cs_span name;
    const unsigned char *args;         /* function.arguments, an object, as sent (not yet checked) */
    ptrdiff_t args_n;
} cs_ocall;

/* What cs_ollama_line found in a line besides its calls. */
typedef struct {
    cs_span content, thinking;         /* message.content; message.thinking, CS_ABSENT when not sent */
    int done;                          /* "done":true: the last line */
    cs_span reason;                    /* done_reason, CS_ABSENT when not sent */
    cs_val prompt_eval_count, eval_count;   /* kind CS_T_ABSENT when not sent; p/n the number as sent */
} cs_oline;

/* cs_ollama_line(p, n, line, calls, max): read an Ollama chat line in the
 * shape its server writes (Go's encoding/json: no whitespace, struct fields
 * in order, empty ones left out), carrying text, tool calls or both, or the
 * last line with its counts:
 *   {"model":S[,"remote_model":S][,"remote_host":S],"created_at":S,
 *    "message":{"role":S,"content":S[,"thinking":S]
 *    [,"tool_calls":[{["id":S,]"function":{["index":N,]"name":S,"arguments":{..}}},..]]},
 *    "done":false}  or  ["done_reason":S,]"done":true[,"total_duration":N] … [,"eval_duration":N]}
 *   (or "done":true,"done_reason":S, as newer servers write it)
 * Returns the number of calls (0 for a line without) with line and calls
 * filled, or -1 when the line is anything else or has more than max calls:
 * the caller then reads it the general way.  Every part is checked as
 * cs_extract would check it except the arguments objects, which the caller
 * must have orjson parse, falling back when one does not. */
static inline int cs_ollama_line(const unsigned char *p, ptrdiff_t n, cs_oline *line, cs_ocall *calls, int max)
{
    static const char *const metrics[] = {"\"total_duration\":", "\"load_duration\":", "\"prompt_eval_count\":",
                                          "\"prompt_eval_duration\":", "\"eval_count\":", "\"eval_duration\":"};
    const unsigned char *e = p + n, *q;
    int esc, count = 0, k;
#define CS_OLIT(lit) \
    if (e - p < (ptrdiff_t)sizeof(lit) - 1 || !cs_same(p, lit, sizeof(lit) - 1)) return -1; \
    p += sizeof(lit) - 1
#define CS_OSTR(span) \
    esc = 0; \
    q = cs_str(p, e, &esc); \
    if (!q) return -1; \
    if (span) { (span)->p = p; (span)->n = q - p; (span)->kind = CS_STR; (span)->has_esc = esc; } \
    p = q + 1
#define CS_AT(lit) (e - p >= (ptrdiff_t)sizeof(lit) - 1 && cs_same(p, lit, sizeof(lit) - 1))
    CS_OLIT("{\"model\":\"");
    CS_OSTR((cs_span *)NULL);
    if (CS_AT(",\"remote_model\":\"")) {        /* a cloud model run through a local server */
        p += sizeof(",\"remote_model\":\"") - 1;
        CS_OSTR((cs_span *)NULL);
    }
    if (CS_AT(",\"remote_host\":\"")) {
        p += sizeof(",\"remote_host\":\"") - 1;
        CS_OSTR((cs_span *)NULL);
    }
    CS_OLIT(",\"created_at\":\"");
    CS_OSTR((cs_span *)NULL);
    CS_OLIT(",\"message\":{\"role\":\"");
    CS_OSTR((cs_span *)NULL);
    CS_OLIT(",\"content\":\"");
    CS_OSTR(&line->content);
    line->thinking.kind = CS_ABSENT;
    line->thinking.n = 0;
    if (CS_AT(",\"thinking\":\"")) {
        p += sizeof(",\"thinking\":\"") - 1;
        CS_OSTR(&line->thinking);
    }
    if (CS_AT(",\"tool_calls\":[")) {
        p += sizeof(",\"tool_calls\":[") - 1;
        for (;;) {
            cs_ocall *c;
            if (count == max) return -1;
            c = &calls[count++];
            CS_OLIT("{");
            c->id.kind = CS_ABSENT;
            c->id.n = 0;
            if (CS_AT("\"id\":\"")) {
                p += sizeof("\"id\":\"") - 1;
                CS_OSTR(&c->id);
                CS_OLIT(",");
            }
            CS_OLIT("\"function\":{");
            if (CS_AT("\"index\":")) {
                p += sizeof("\"index\":") - 1;
                p = cs_num(p, e);
                if (!p) return -1;
                CS_OLIT(",");
            }
            CS_OLIT("\"name\":\"");
            CS_OSTR(&c->name);
            CS_OLIT(",\"arguments\":");
            if (p >= e || *p != '{') return -1;
            q = cs_skip_loose(p, e);
            if (!q) return -1;
            c->args = p;
            c->args_n = q - p;
            p = q;
            CS_OLIT("}}");
            if (p < e && *p == ',') {
                p++;
                continue;
            }
            CS_OLIT("]");
            break;
        }
    }
    line->reason.kind = CS_ABSENT;
    line->prompt_eval_count.kind = CS_T_ABSENT;
    line->eval_count.kind = CS_T_ABSENT;
    line->done = 0;
    if (CS_AT("},\"done\":false}")) {
        p += sizeof("},\"done\":false}") - 1;
        return p == e ? count : -1;
    }
    /* Go writes a struct's fields in order: older servers put done_reason before done, newer ones after it. */
    CS_OLIT("},");
    if (CS_AT("\"done_reason\":\"")) {
        p += sizeof("\"done_reason\":\"") - 1;
        CS_OSTR(&line->reason);
        CS_OLIT(",");
    }
    CS_OLIT("\"done\":true");
    line->done = 1;
    if (line->reason.kind == CS_ABSENT && CS_AT(",\"done_reason\":\"")) {
        p += sizeof(",\"done_reason\":\"") - 1;
        CS_OSTR(&line->reason);
    }
    for (k = 0; k < 6; k++) {
        size_t len = strlen(metrics[k]);
        cs_val *v;
        if (e - p < (ptrdiff_t)len + 1 || *p != ',' || !cs_same(p + 1, metrics[k], len)) continue;
        p += 1 + len;
        v = k == 2 ? &line->prompt_eval_count : k == 4 ? &line->eval_count : NULL;
        q = p;
        if (v) {
            p = cs_xnum(p, e, v);
            if (!p) return -1;
            v->p = q;
            v->n = p - q;
            v->has_esc = 0;
        } else {
            p = cs_num(p, e);
            if (!p) return -1;
        }
    }
    CS_OLIT("}");
#undef CS_OLIT
#undef CS_OSTR
#undef CS_AT
    return p == e ? count : -1;
}

/* ------------------------------------------------------------------------ */
/* compact re-encoding, as orjson.dumps(orjson.loads(text)) writes it        */
/* ------------------------------------------------------------------------ */
/*
 * cs_compact(p, n, out) writes the JSON value p[0..n), already checked (a
 * value cs_extract located, or one orjson parsed), the way orjson.dumps would write
 * orjson.loads of it: no whitespace, strings with only '"', '\\' and control
 * characters escaped (\b \t \n \f \r, else \u00xx), every other character as
 * UTF-8, "-0" as 0.  out must hold n bytes (the result is never longer).
 * Returns the length written, or -1 when the value holds what orjson would
 * write differently and this does not reproduce: a number with an exponent,
 * or with a fraction and more than 15 significant digits or below 1e-4 (see
 * cs_cfrac), an integer of 19 digits or more, an object with a duplicate
 * key, a key with an escape, more than CS_COMPACT_KEYS keys in one object.
 * The caller then serialises the parsed value itself.
 */
#define CS_COMPACT_KEYS 24

typedef struct {
    const unsigned char *p, *e;
    unsigned char *o;
} cs_cctx;

static CS_ALWAYS_INLINE void cs_cws(cs_cctx *c)
{
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static inline void cs_cput(cs_cctx *c, unsigned cp)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char *o = c->o;
    if (cp < 0x20) {
        *o++ = '\\';
        switch (cp) {
        case 0x08: *o++ = 'b'; break;
        case 0x09: *o++ = 't'; break;
        case 0x0a: *o++ = 'n'; break;
        case 0x0c: *o++ = 'f'; break;
        case 0x0d: *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = (unsigned char)hex[cp >> 4]; *o++ = (unsigned char)hex[cp & 15u];
        }
    } else if (cp == '"' || cp == '\\') {
        *o++ = '\\';
        *o++ = (unsigned char)cp;
    } else if (cp < 0x80) {
        *o++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | (cp >> 6));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | (cp >> 12));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | (cp >> 18));
        *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    c->o = o;
}

/* A string at '"' (validated: escapes well formed, surrogates paired). */
static inline void cs_cstr(cs_cctx *c)
{
    const unsigned char *p = c->p + 1;
    *c->o++ = '"';
    for (;;) {
        const unsigned char *q = cs_quote_or_backslash(p, c->e);   /* validated: a closing quote follows */
        memcpy(c->o, p, (size_t)(q - p));
        c->o += q - p;
        p = q;
        if (*p == '"') break;
        switch (p[1]) {
        case 'u': {
            unsigned cp = (unsigned)cs_hex4(p + 2);    /* validated: four hex digits */
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {        /* a high surrogate: its low half follows */
                cp = 0x10000u + ((cp - 0xD800u) << 10) + ((unsigned)cs_hex4(p + 2) - 0xDC00u);
                p += 6;
            }
            cs_cput(c, cp);
            break;
        }
        case '/': *c->o++ = '/'; p += 2; break;
        default: *c->o++ = '\\'; *c->o++ = p[1]; p += 2; break;   /* " \\ b f n r t */
        }
    }
    c->p = p + 1;
    *c->o++ = '"';
}

static int cs_cval(cs_cctx *c, int depth);

static int cs_cobj(cs_cctx *c, int depth)
{
    const unsigned char *keys[CS_COMPACT_KEYS];
    ptrdiff_t lens[CS_COMPACT_KEYS];
    int nkeys = 0, k;
    *c->o++ = '{';
    c->p++;
    cs_cws(c);
    if (*c->p == '}') { c->p++; *c->o++ = '}'; return 0; }
    for (;;) {
        const unsigned char *key = c->p + 1, *q = key;
        while (*q != '"' && *q != '\\') q++;
        if (*q == '\\' || nkeys == CS_COMPACT_KEYS) return -1;
        for (k = 0; k < nkeys; k++)
            if (lens[k] == q - key && memcmp(keys[k], key, (size_t)(q - key)) == 0) return -1;
        keys[nkeys] = key;
        lens[nkeys++] = q - key;
        *c->o++ = '"';
        memcpy(c->o, key, (size_t)(q - key));
        c->o += q - key;
        *c->o++ = '"';
        c->p = q + 1;
        cs_cws(c);
        c->p++;                                        /* ':' */
        *c->o++ = ':';
        cs_cws(c);
        if (cs_cval(c, depth + 1) < 0) return -1;
        cs_cws(c);
        if (*c->p == '}') { c->p++; *c->o++ = '}'; return 0; }
        c->p++;                                        /* ',' */
        *c->o++ = ',';
        cs_cws(c);
    }
}

static int cs_carr(cs_cctx *c, int depth)
{
    *c->o++ = '[';
    c->p++;
    cs_cws(c);
    if (*c->p == ']') { c->p++; *c->o++ = ']'; return 0; }
    for (;;) {
        if (cs_cval(c, depth + 1) < 0) return -1;
        cs_cws(c);
        if (*c->p == ']') { c->p++; *c->o++ = ']'; return 0; }
        c->p++;
        *c->o++ = ',';
        cs_cws(c);
    }
}

/* A number with a fraction, s at its start and p at its '.'.  One of at most
 * 15 significant digits and not below 1e-4 reads back as exactly those digits,
 * which orjson writes the same way with the fraction's trailing zeros dropped
 * (one digit kept): 12.340 -> 12.34, 1.00 -> 1.0.  Anything else is left to
 * orjson (-1): more digits, an exponent, or a small number it writes as 1e-6. */
static int cs_cfrac(cs_cctx *c, const unsigned char *s, const unsigned char *p)
{
    const unsigned char *ip = s + (*s == '-'), *f = p + 1, *fe = f, *last, *z;
    ptrdiff_t sig;
    while (fe < c->e && (unsigned)(*fe - '0') < 10u) fe++;
    if (fe < c->e && (*fe == 'e' || *fe == 'E')) return -1;
    last = fe;
    while (last > f + 1 && last[-1] == '0') last--;
    if (p - ip == 1 && *ip == '0') {                 /* 0.xxx: its digits start at the first non-zero */
        for (z = f; z < last && *z == '0'; z++) {}
        if (z < last && z - f > 3) return -1;         /* below 1e-4 */
        sig = last - z;
    } else {
        sig = (p - ip) + (last - f);
    }
    if (sig > 15) return -1;
    memcpy(c->o, s, (size_t)(p - s));
    c->o += p - s;
    *c->o++ = '.';
    memcpy(c->o, f, (size_t)(last - f));
    c->o += last - f;
    c->p = fe;
    return 0;
}

static int cs_cval(cs_cctx *c, int depth)
{
    const unsigned char *p = c->p, *s;
    if (depth > 64) return -1;
    switch (*p) {
    case '"': cs_cstr(c); return 0;
    case '{': return cs_cobj(c, depth);
    case '[': return cs_carr(c, depth);
    case 't': memcpy(c->o, "true", 4); c->o += 4; c->p += 4; return 0;
    case 'f': memcpy(c->o, "false", 5); c->o += 5; c->p += 5; return 0;
    case 'n': memcpy(c->o, "null", 4); c->o += 4; c->p += 4; return 0;
    default:
        s = p;
        if (*p == '-') p++;
        while (p < c->e && (unsigned)(*p - '0') < 10u) p++;
        if (p < c->e && (*p == 'e' || *p == 'E')) return -1;             /* an exponent: orjson's own form */
        if (p < c->e && *p == '.') return cs_cfrac(c, s, p);
        if (p - s > 18) return -1;                                           /* may not fit 64 bits */
        if (p - s == 2 && s[0] == '-' && s[1] == '0') { *c->o++ = '0'; c->p = p; return 0; }
        memcpy(c->o, s, (size_t)(p - s));
        c->o += p - s;
        c->p = p;
        return 0;
    }
}

static inline ptrdiff_t cs_compact(const unsigned char *p, ptrdiff_t n, unsigned char *out)
{
    cs_cctx c;
    c.p = p;
    c.e = p + n;
    c.o = out;
    cs_cws(&c);
    if (c.p >= c.e || cs_cval(&c, 1) < 0) return -1;
    return c.o - out;
}

#endif /* CALLSTITCH_CHUNKSCAN_H */
