/* The AWS event stream's arithmetic for the compiled twin: big-endian fields and CRC-32.
 *
 * es_crc32 computes what zlib.crc32 does (the IEEE 802.3 polynomial, reflected, initial and final
 * value 0xFFFFFFFF), eight bytes a step ("slicing by 8"); es_crc_init fills its tables once.
 */
#ifndef CALLSTITCH_EVENTSTREAM_H
#define CALLSTITCH_EVENTSTREAM_H

#include <stddef.h>
#include <stdint.h>

static uint32_t es_crc_table[8][256];

static void es_crc_init(void)
{
    uint32_t i, c;
    int k;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        es_crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = es_crc_table[0][i];
        for (k = 1; k < 8; k++) {
            c = es_crc_table[0][c & 0xFFu] ^ (c >> 8);
            es_crc_table[k][i] = c;
        }
    }
}

/* Not inlined: inlined into the message loop its instruction count moved by 10% with unrelated
 * changes to that loop (register pressure); one copy of its own keeps it steady and small. */
#if defined(_MSC_VER)
#define ES_NOINLINE __declspec(noinline)
#else
#define ES_NOINLINE __attribute__((noinline))
#endif
static ES_NOINLINE uint32_t es_crc32(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu, a, b;
    while (n >= 8) {
        a = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        b = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = es_crc_table[7][a & 0xFFu] ^ es_crc_table[6][(a >> 8) & 0xFFu] ^ es_crc_table[5][(a >> 16) & 0xFFu]
            ^ es_crc_table[4][a >> 24] ^ es_crc_table[3][b & 0xFFu] ^ es_crc_table[2][(b >> 8) & 0xFFu]
            ^ es_crc_table[1][(b >> 16) & 0xFFu] ^ es_crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = es_crc_table[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline uint32_t es_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* 1 when the 12 bytes at p are a sound prelude: lengths that fit, and a matching prelude CRC. */
static inline int es_prelude_ok(const unsigned char *p)
{
    uint32_t total = es_be32(p), headers = es_be32(p + 4);
    return total >= 16u && headers <= total - 16u && es_crc32(p, 8) == es_be32(p + 8);
}

#endif /* CALLSTITCH_EVENTSTREAM_H */
