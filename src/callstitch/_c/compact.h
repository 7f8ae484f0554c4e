/*
 * compact.h -- compact re-encoding of a validated JSON value, byte for byte
 * as orjson.dumps(orjson.loads(text)) writes it (cs_compact).
 */
#ifndef CALLSTITCH_COMPACT_H
#define CALLSTITCH_COMPACT_H

#include "lex.h"

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

#endif /* CALLSTITCH_COMPACT_H */
