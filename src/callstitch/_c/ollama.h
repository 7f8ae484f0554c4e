/*
 * ollama.h -- the bespoke reader of an Ollama chat line in the shape its
 * server writes (cs_ollama_line), and the loose skippers it uses for values
 * it only passes over.
 */
#ifndef CALLSTITCH_OLLAMA_H
#define CALLSTITCH_OLLAMA_H

#include "lex.h"
#include "digits.h"

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
 * would).  *long_run is set when a run of CS_LONG_RUN digits or more stands
 * outside the strings: only a number can be one orjson reads inexactly, and
 * measuring here, where the bytes are walked anyway, spares cs_long_digit_run
 * its pass over the strings (whose digits never change orjson's reading). */
#define CS_LOOSE_DEPTH 512
static inline const unsigned char *cs_skip_loose(const unsigned char *p, const unsigned char *e, int *long_run)
{
    ptrdiff_t depth = 0;
    const unsigned char *q;
    *long_run = 0;
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
        case '0': case '1': case '2': case '3': case '4':
        case '5': case '6': case '7': case '8': case '9':
            for (q = p + 1; q < e && cs_is_digit(*q); q++)
                ;
            if (q - p >= CS_LONG_RUN) *long_run = 1;
            p = q - 1;
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
    cs_val index;                      /* function.index, kind CS_T_ABSENT when not sent; p/n the number as sent */
    const unsigned char *args;         /* function.arguments, an object, as sent (not yet checked) */
    ptrdiff_t args_n;
    int long_run;                      /* args hold a long digit run outside their strings (cs_skip_loose) */
} cs_ocall;

/* What cs_ollama_line found in a line besides its calls. */
typedef struct {
    cs_span content, thinking;         /* message.content; message.thinking, CS_ABSENT when not sent */
    ptrdiff_t head_n;                  /* the line's length up to message.role's closing quote */
    int done;                          /* "done":true: the last line */
    cs_span reason;                    /* done_reason, CS_ABSENT when not sent */
    cs_val prompt_eval_count, eval_count;   /* kind CS_T_ABSENT when not sent; p/n the number as sent */
} cs_oline;

/* The steps of cs_ollama_line below: each reads one part of the line from p
 * (e is the line's end) and returns p past it, or NULL when the part is not
 * in the shape the server writes. */
#define CS_OAT(lit) (e - p >= (ptrdiff_t)sizeof(lit) - 1 && cs_same(p, lit, sizeof(lit) - 1))
#define CS_OLIT(lit) \
    if (!CS_OAT(lit)) return NULL; \
    p += sizeof(lit) - 1
#define CS_OSTR(span) \
    do { \
        int esc_ = 0; \
        const unsigned char *q_ = cs_str(p, e, &esc_); \
        if (!q_) return NULL; \
        if (span) { (span)->p = p; (span)->n = q_ - p; (span)->kind = CS_STR; (span)->has_esc = esc_; } \
        p = q_ + 1; \
    } while (0)
/* An optional "key":"string" part: read when it is there. */
#define CS_OOPT(lit, span) \
    if (CS_OAT(lit)) { \
        p += sizeof(lit) - 1; \
        CS_OSTR(span); \
    }

/* A number at p, its span noted in v. */
static CS_ALWAYS_INLINE const unsigned char *cs_onum(const unsigned char *p, const unsigned char *e, cs_val *v)
{
    const unsigned char *q = cs_xnum(p, e, v);
    if (!q) return NULL;
    v->p = p;
    v->n = q - p;
    v->has_esc = 0;
    return q;
}

/* {"model":S[,"remote_model":S][,"remote_host":S],"created_at":S,"message":{"role":S,"content":S[,"thinking":S] */
static CS_ALWAYS_INLINE const unsigned char *cs_ollama_head(const unsigned char *p, const unsigned char *e, cs_oline *line)
{
    const unsigned char *start = p;
    CS_OLIT("{\"model\":\"");
    CS_OSTR((cs_span *)NULL);
    CS_OOPT(",\"remote_model\":\"", (cs_span *)NULL);   /* a cloud model run through a local server */
    CS_OOPT(",\"remote_host\":\"", (cs_span *)NULL);
    CS_OLIT(",\"created_at\":\"");
    CS_OSTR((cs_span *)NULL);
    CS_OLIT(",\"message\":{\"role\":\"");
    CS_OSTR((cs_span *)NULL);
    line->head_n = p - start;
    CS_OLIT(",\"content\":\"");
    CS_OSTR(&line->content);
    line->thinking.kind = CS_ABSENT;
    line->thinking.n = 0;
    CS_OOPT(",\"thinking\":\"", &line->thinking);
    return p;
}

/* One entry of tool_calls: {["id":S,]"function":{["index":N,]"name":S,"arguments":{..}}} */
static CS_ALWAYS_INLINE const unsigned char *cs_ollama_call(const unsigned char *p, const unsigned char *e, cs_ocall *c)
{
    const unsigned char *q;
    CS_OLIT("{");
    c->id.kind = CS_ABSENT;
    c->id.n = 0;
    if (CS_OAT("\"id\":\"")) {
        p += sizeof("\"id\":\"") - 1;
        CS_OSTR(&c->id);
        CS_OLIT(",");
    }
    CS_OLIT("\"function\":{");
    c->index.kind = CS_T_ABSENT;
    if (CS_OAT("\"index\":")) {
        p = cs_onum(p + sizeof("\"index\":") - 1, e, &c->index);
        if (!p) return NULL;
        CS_OLIT(",");
    }
    CS_OLIT("\"name\":\"");
    CS_OSTR(&c->name);
    CS_OLIT(",\"arguments\":");
    if (p >= e || *p != '{') return NULL;
    q = cs_skip_loose(p, e, &c->long_run);
    if (!q) return NULL;
    c->args = p;
    c->args_n = q - p;
    p = q;
    CS_OLIT("}}");
    return p;
}

/* The last line's counts after "done":true: [,"total_duration":N] … [,"eval_duration":N] */
static CS_ALWAYS_INLINE const unsigned char *cs_ollama_metrics(const unsigned char *p, const unsigned char *e, cs_oline *line)
{
    static const char *const metrics[] = {"\"total_duration\":", "\"load_duration\":", "\"prompt_eval_count\":",
                                          "\"prompt_eval_duration\":", "\"eval_count\":", "\"eval_duration\":"};
    int k;
    for (k = 0; k < 6; k++) {
        size_t len = strlen(metrics[k]);
        cs_val *v = k == 2 ? &line->prompt_eval_count : k == 4 ? &line->eval_count : NULL;
        if (e - p < (ptrdiff_t)len + 1 || *p != ',' || !cs_same(p + 1, metrics[k], len)) continue;
        p += 1 + len;
        p = v ? cs_onum(p, e, v) : cs_num(p, e);
        if (!p) return NULL;
    }
    return p;
}

/* What follows the message: },"done":false}  or  },["done_reason":S,]"done":true[,"done_reason":S][counts]} */
static CS_ALWAYS_INLINE const unsigned char *cs_ollama_end(const unsigned char *p, const unsigned char *e, cs_oline *line)
{
    line->reason.kind = CS_ABSENT;
    line->prompt_eval_count.kind = CS_T_ABSENT;
    line->eval_count.kind = CS_T_ABSENT;
    line->done = 0;
    if (CS_OAT("},\"done\":false}"))
        return p + sizeof("},\"done\":false}") - 1;
    /* Go writes a struct's fields in order: older servers put done_reason before done, newer ones after it. */
    CS_OLIT("},");
    if (CS_OAT("\"done_reason\":\"")) {
        p += sizeof("\"done_reason\":\"") - 1;
        CS_OSTR(&line->reason);
        CS_OLIT(",");
    }
    CS_OLIT("\"done\":true");
    line->done = 1;
    if (line->reason.kind == CS_ABSENT)
        CS_OOPT(",\"done_reason\":\"", &line->reason);
    p = cs_ollama_metrics(p, e, line);
    if (!p) return NULL;
    CS_OLIT("}");
    return p;
}

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
    const unsigned char *e = p + n;
    int count = 0;
    p = cs_ollama_head(p, e, line);
    if (!p) return -1;
    if (CS_OAT(",\"tool_calls\":[")) {
        p += sizeof(",\"tool_calls\":[") - 1;
        for (;;) {
            if (count == max) return -1;
            p = cs_ollama_call(p, e, &calls[count++]);
            if (!p) return -1;
            if (p >= e || *p != ',') break;
            p++;
        }
        if (p >= e || *p != ']') return -1;
        p++;
    }
    p = cs_ollama_end(p, e, line);
    return p == e ? count : -1;
}
#undef CS_OAT
#undef CS_OLIT
#undef CS_OSTR
#undef CS_OOPT

#endif /* CALLSTITCH_OLLAMA_H */
