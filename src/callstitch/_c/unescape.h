/*
 * unescape.h -- decoding a string span the readers located: its JSON escapes
 * to UTF-8, and a UTF-8 validity check.
 */
#ifndef CALLSTITCH_UNESCAPE_H
#define CALLSTITCH_UNESCAPE_H

#include "lex.h"

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

#endif /* CALLSTITCH_UNESCAPE_H */
