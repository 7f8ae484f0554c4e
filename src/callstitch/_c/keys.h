/*
 * keys.h -- matching the keys of a chat chunk's objects: one id per key name
 * the chat reader interprets (CS_K_*), read at a key's opening quote.
 */
#ifndef CALLSTITCH_KEYS_H
#define CALLSTITCH_KEYS_H

#include "lex.h"

/* ------------------------------------------------------------------------ */
/* object keys                                                               */
/* ------------------------------------------------------------------------ */

/* Key ids. Names are context free; each object reader maps the ones it
 * interprets and skips the rest. CS_K_OTHER = any other key (the chat reader hands a chunk
 * with one to the general path: the turn keeps what callstitch has never heard of). */
enum {
    CS_K_OTHER = 0, CS_K_CHOICES, CS_K_USAGE, CS_K_ERROR, CS_K_INDEX, CS_K_DELTA,
    CS_K_FINISH, CS_K_MESSAGE, CS_K_CONTENT, CS_K_RCONTENT, CS_K_REASONING,
    CS_K_REFUSAL, CS_K_TOOLCALLS, CS_K_FCALL, CS_K_ID, CS_K_FUNCTION, CS_K_NAME,
    CS_K_ARGS, CS_K_CUSTOM, CS_K_TYPE,
    /* read by the chat reader only to know them from keys it has never heard of (which go down
     * the general path, for the turn: see chat.h) */
    CS_K_OBJECT, CS_K_CREATED, CS_K_MODEL, CS_K_SYSFP, CS_K_TIER, CS_K_OBFUSC, CS_K_LOGPROBS, CS_K_ROLE,
    CS_K_BAD = -1
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
        if (CS_KEYIS("role")) return CS_K_ROLE;
        return CS_K_OTHER;
    case 5:
        if (CS_KEYIS("index")) return CS_K_INDEX;
        if (CS_KEYIS("delta")) return CS_K_DELTA;
        if (CS_KEYIS("usage")) return CS_K_USAGE;
        if (CS_KEYIS("error")) return CS_K_ERROR;
        if (CS_KEYIS("model")) return CS_K_MODEL;
        return CS_K_OTHER;
    case 6:
        if (CS_KEYIS("custom")) return CS_K_CUSTOM;
        if (CS_KEYIS("object")) return CS_K_OBJECT;
        return CS_K_OTHER;
    case 7:
        if (CS_KEYIS("choices")) return CS_K_CHOICES;
        if (CS_KEYIS("content")) return CS_K_CONTENT;
        if (CS_KEYIS("refusal")) return CS_K_REFUSAL;
        if (CS_KEYIS("message")) return CS_K_MESSAGE;
        if (CS_KEYIS("created")) return CS_K_CREATED;
        return CS_K_OTHER;
    case 8:
        if (CS_KEYIS("function")) return CS_K_FUNCTION;
        if (CS_KEYIS("logprobs")) return CS_K_LOGPROBS;
        return CS_K_OTHER;
    case 9:
        if (CS_KEYIS("arguments")) return CS_K_ARGS;
        if (CS_KEYIS("reasoning")) return CS_K_REASONING;
        return CS_K_OTHER;
    case 10: return CS_KEYIS("tool_calls") ? CS_K_TOOLCALLS : CS_K_OTHER;
    case 11: return CS_KEYIS("obfuscation") ? CS_K_OBFUSC : CS_K_OTHER;
    case 12: return CS_KEYIS("service_tier") ? CS_K_TIER : CS_K_OTHER;
    case 13:
        if (CS_KEYIS("finish_reason")) return CS_K_FINISH;
        if (CS_KEYIS("function_call")) return CS_K_FCALL;
        return CS_K_OTHER;
    case 17: return CS_KEYIS("reasoning_content") ? CS_K_RCONTENT : CS_K_OTHER;
    case 18: return CS_KEYIS("system_fingerprint") ? CS_K_SYSFP : CS_K_OTHER;
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
                  CS_LIT("created", CS_K_CREATED); break;
        case 'd': CS_LIT("delta", CS_K_DELTA); break;
        case 'e': CS_LIT("error", CS_K_ERROR); break;
        case 'f': CS_LIT("function", CS_K_FUNCTION); CS_LIT("finish_reason", CS_K_FINISH);
                  CS_LIT("function_call", CS_K_FCALL); break;
        case 'i': CS_LIT("index", CS_K_INDEX); CS_LIT("id", CS_K_ID); break;
        case 'l': CS_LIT("logprobs", CS_K_LOGPROBS); break;
        case 'm': CS_LIT("model", CS_K_MODEL); CS_LIT("message", CS_K_MESSAGE); break;
        case 'n': CS_LIT("name", CS_K_NAME); break;
        case 'o': CS_LIT("object", CS_K_OBJECT); CS_LIT("obfuscation", CS_K_OBFUSC); break;
        case 'r': CS_LIT("role", CS_K_ROLE); CS_LIT("reasoning_content", CS_K_RCONTENT);
                  CS_LIT("reasoning", CS_K_REASONING); CS_LIT("refusal", CS_K_REFUSAL); break;
        case 's': CS_LIT("system_fingerprint", CS_K_SYSFP); CS_LIT("service_tier", CS_K_TIER); break;
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

#endif /* CALLSTITCH_KEYS_H */
