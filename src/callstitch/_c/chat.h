/*
 * chat.h -- validating on-demand reader for one OpenAI-style
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
 * For the whole turn (to_response), a chunk is also handed over when it carries
 * anything the fast path does not keep: a key it has never heard of in the
 * chunk, a choice, a delta, a tool call or a function (the turn carries those
 * along), non-null logprobs, or an empty "object" (Azure's content-filter
 * chunks). The envelope fields (id, created, model, system_fingerprint,
 * service_tier) are skipped unless the caller wants them (the turn keeps the
 * first value of each: CS_ENV_* bits, the same as _turns/openai_chat.py's
 * ENVELOPE); a wanted one is read (a string or null; created an integer or
 * null, else the chunk is handed over) and reported in env and env_str /
 * created.
 *
 * Deliberately conservative (returns 0 although orjson would accept):
 *   - any key containing a backslash in an object whose keys are
 *     interpreted (top level, choice, delta, tool call, function);
 *   - any number whose digit count + |exponent| exceeds 300;
 *   - an "index" with 19 or more digits;
 *   - nesting deeper than 64 (top-level object = depth 1).
 */
#ifndef CALLSTITCH_CHAT_H
#define CALLSTITCH_CHAT_H

#include "lex.h"
#include "keys.h"

#define CS_MAX_CHOICES 8
#define CS_MAX_FRAGS 32

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

#define CS_ENV_ID 1u
#define CS_ENV_CREATED 2u
#define CS_ENV_MODEL 4u
#define CS_ENV_SYSFP 8u
#define CS_ENV_TIER 16u

typedef struct {
    int n_choices; cs_choice choices[CS_MAX_CHOICES];
    int n_frags;   cs_frag frags[CS_MAX_FRAGS];
    unsigned want;                  /* in: CS_ENV_* of the envelope fields to read */
    unsigned env;                   /* out: those of them present and not null */
    cs_span env_str[4];             /* id, model, system_fingerprint, service_tier, when wanted */
    int64_t created;                /* created, when wanted */
    int reasoning;                  /* a delta has reasoning_content or reasoning (null or not) */
    const unsigned char *usage;     /* the usage object as sent (checked JSON), when usage_n > 0 */
    ptrdiff_t usage_n;              /* 0 when usage is absent or null */
} cs_chunk;

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
        default:        return NULL;   /* an extra the turn keeps, or a bad key */
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
        default:   /* custom, an extra the turn keeps (extra_content …), a bad key */
            return NULL;
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
        case CS_K_RCONTENT:  p = cs_strnull(p, e, &ch->reasoning_content); out->reasoning = 1; break;
        case CS_K_REASONING: p = cs_strnull(p, e, &ch->reasoning); out->reasoning = 1; break;
        case CS_K_REFUSAL:   p = cs_strnull(p, e, &ch->refusal); break;
        case CS_K_TOOLCALLS:
            if (seen_tc) return NULL;
            seen_tc = 1;
            if (*p == '[') p = cs_tool_calls(p, e, out, ch);
            else if (cs_is_null(p, e)) p += 4;
            else return NULL;
            break;
        case CS_K_ROLE:   /* the message's role is "assistant" whatever a chunk says */
            p = cs_skipv(p, e, 4);
            break;
        default:   /* function_call, an extra the turn keeps (annotations, audio …), a bad key */
            return NULL;
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
        case CS_K_LOGPROBS:   /* null; the turn keeps logprobs */
            if (!cs_is_null(p, e)) return NULL;
            p += 4;
            break;
        default:   /* an extra the turn keeps (stop_reason, content_filter_results …), a bad key */
            return NULL;
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

/* an envelope string's value (depth 1); p at its first byte: read when wanted, else skipped */
static inline const unsigned char *cs_env_str(const unsigned char *p, const unsigned char *e, cs_chunk *out,
                                              int k, unsigned bit)
{
    if (!(out->want & bit)) return cs_skipv(p, e, 1);
    p = cs_strnull(p, e, &out->env_str[k]);
    if (p && out->env_str[k].kind == CS_STR) out->env |= bit;
    return p;
}

/* ------------------------------------------------------------------------ */
/* public API                                                                */
/* ------------------------------------------------------------------------ */

/* 1 = understood (out filled), 0 = hand to the general path. */
/* want: the CS_ENV_* envelope fields to read (see above). */
/* One top-level member's value at p, its key's id given: returns p past it, or
 * NULL when the chunk is not one the fast path fully understands. seen holds
 * the keys met once already (choices 1, usage 2, error 4): twice is refused. */
static CS_ALWAYS_INLINE const unsigned char *cs_top_member(const unsigned char *p, const unsigned char *e,
                                                            cs_chunk *out, int id, unsigned *seen)
{
    switch (id) {
    case CS_K_CHOICES:
        if (*seen & 1u) return NULL;
        *seen |= 1u;
        if (*p == '[') return cs_choices(p, e, out);
        if (cs_is_null(p, e)) return p + 4;
        return NULL;
    case CS_K_USAGE:
        if (*seen & 2u) return NULL;
        *seen |= 2u;
        if (cs_is_null(p, e)) return p + 4;
        if (*p != '{') return NULL;   /* usage of another type: the general path keeps it as parsed */
        out->usage = p;
        p = cs_skip(p, e, 1);         /* checked as orjson would: the text is parsed at the end */
        if (p) out->usage_n = p - out->usage;
        return p;
    case CS_K_ERROR:
        if (*seen & 4u) return NULL;
        *seen |= 4u;
        return cs_is_null(p, e) ? p + 4 : NULL;
    case CS_K_ID:    return cs_env_str(p, e, out, 0, CS_ENV_ID);
    case CS_K_MODEL: return cs_env_str(p, e, out, 1, CS_ENV_MODEL);
    case CS_K_SYSFP: return cs_env_str(p, e, out, 2, CS_ENV_SYSFP);
    case CS_K_TIER:  return cs_env_str(p, e, out, 3, CS_ENV_TIER);
    case CS_K_CREATED:
        if (!(out->want & CS_ENV_CREATED)) return cs_skipv(p, e, 1);
        if (cs_is_null(p, e)) return p + 4;
        if (out->env & CS_ENV_CREATED) return NULL;   /* twice */
        out->env |= CS_ENV_CREATED;
        return cs_int64(p, e, &out->created);
    case CS_K_OBJECT:
        if (*p == '"' && e - p >= 2 && p[1] == '"') return NULL;   /* "": the general path decides */
        return cs_skipv(p, e, 1);
    case CS_K_OBFUSC:
        return cs_skipv(p, e, 1);
    default:   /* an extra the turn keeps (x_groq, provider …), a bad key */
        return NULL;
    }
}

static inline int cs_scan_chat_chunk(const unsigned char *p, ptrdiff_t n, cs_chunk *out, unsigned want)
{
    const unsigned char *e = p + n;
    int id, r;
    unsigned seen = 0;

    out->n_choices = 0;
    out->n_frags = 0;
    out->want = want;
    out->env = 0;
    out->reasoning = 0;
    out->usage_n = 0;
    if (want) {
        int k;
        for (k = 0; k < 4; k++) cs_span_clear(&out->env_str[k]);
    }
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
            p = cs_top_member(p, e, out, id, &seen);
            if (!p) return 0;
            r = cs_next_member(&p, e, '}');
            if (r < 0) return 0;
            if (r == 0) break;
        }
    }
    p = cs_ws(p, e);
    return p == e;
}

#endif /* CALLSTITCH_CHAT_H */
