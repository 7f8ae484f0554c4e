# Included by _accumulator_c.pyx: the format codes of the fast paths, and what each reads of its
# format's events (the path tables cs_extract fills), with the facts they take from the adapters.

# What the fast path reads from each format's commonest events; any value kind is allowed, so
# the reader only validates and locates, and the decisions stay here, readable.
cdef enum:
    _ANY = 31
    FMT_OTHER = 0
    FMT_CHAT = 1
    FMT_RESPONSES = 2
    FMT_ANTHROPIC = 3
    FMT_BEDROCK = 4
    FMT_COHERE = 5
    FMT_GEMINI = 6
    FMT_OLLAMA = 7

cdef cs_want _ANTHROPIC[6]
cdef cs_want _ANTHROPIC_OTHER[12]
cdef cs_want _ANTHROPIC_USAGE[1]
cdef cs_want _RESPONSES[3]
cdef cs_want _RESPONSES_END[12]
cdef cs_want _BEDROCK[5]
cdef cs_want _COHERE[8]
cdef cs_want _GEMINI[8]
cdef cs_want _GEMINI_PIECE[12]
cdef cs_want _GEMINI_PART[9]
cdef cs_want _GEMINI_ENTRY[8]


cdef void _want(cs_want *w, const char *a, const char *b=NULL, const char *c=NULL, const char *d=NULL,
                const char *e=NULL):
    w.path[0] = a
    w.path[1] = b
    w.path[2] = c
    w.path[3] = d
    w.path[4] = e
    for k in range(5, 11):
        w.path[k] = NULL
    w.allowed = _ANY


# anthropic content_block_delta: type, index, delta.type, delta.partial_json, delta.text, delta.thinking
_want(&_ANTHROPIC[0], "type")
_want(&_ANTHROPIC[1], "index")
_want(&_ANTHROPIC[2], "delta", "type")
_want(&_ANTHROPIC[3], "delta", "partial_json")
_want(&_ANTHROPIC[4], "delta", "text")
_want(&_ANTHROPIC[5], "delta", "thinking")
# … and what the adapter reads of the other events (block start and stop, message start, delta, stop),
# with the message object, which the turn keeps (_turns/anthropic.py; block starts and message deltas
# it keeps as their event's JSON text)
_want(&_ANTHROPIC_OTHER[0], "type")
_want(&_ANTHROPIC_OTHER[1], "index")
_want(&_ANTHROPIC_OTHER[2], "content_block")
_want(&_ANTHROPIC_OTHER[3], "content_block", "type")
_want(&_ANTHROPIC_OTHER[4], "content_block", "id")
_want(&_ANTHROPIC_OTHER[5], "content_block", "name")
_want(&_ANTHROPIC_OTHER[6], "content_block", "input")
_want(&_ANTHROPIC_OTHER[7], "content_block", "text")
_want(&_ANTHROPIC_OTHER[8], "content_block", "thinking")
_want(&_ANTHROPIC_OTHER[9], "delta", "stop_reason")
_want(&_ANTHROPIC_OTHER[10], "usage")
_want(&_ANTHROPIC_OTHER[11], "message")
# … and in message_start's message object, its usage (the object itself the turn keeps as its text)
_want(&_ANTHROPIC_USAGE[0], "usage")
# openai-responses deltas: type, item_id, delta
_want(&_RESPONSES[0], "type")
_want(&_RESPONSES[1], "item_id")
_want(&_RESPONSES[2], "delta")
# … and for the closing events, what the adapter reads of their item or response (read only for
# those: fewer wants keep the far commoner deltas fast)
_want(&_RESPONSES_END[0], "type")
_want(&_RESPONSES_END[1], "item_id")
_want(&_RESPONSES_END[2], "delta")
_want(&_RESPONSES_END[3], "item", "type")
_want(&_RESPONSES_END[4], "item", "id")
_want(&_RESPONSES_END[5], "response", "usage")
_want(&_RESPONSES_END[6], "response", "status")
_want(&_RESPONSES_END[7], "response", "incomplete_details", "reason")
_want(&_RESPONSES_END[8], "response", "error")
_want(&_RESPONSES_END[9], "response", "incomplete_details")
_want(&_RESPONSES_END[10], "response")
_want(&_RESPONSES_END[11], "response", "output")
# bedrock contentBlockDelta payload: contentBlockIndex, delta.toolUse, delta.toolUse.input, delta.text,
# delta.reasoningContent
_want(&_BEDROCK[0], "contentBlockIndex")
_want(&_BEDROCK[1], "delta", "toolUse")
_want(&_BEDROCK[2], "delta", "toolUse", "input")
_want(&_BEDROCK[3], "delta", "text")
_want(&_BEDROCK[4], "delta", "reasoningContent")
# cohere: type, index, the call's id, name and arguments, content text and thinking, tool plan
_want(&_COHERE[0], "type")
_want(&_COHERE[1], "index")
_want(&_COHERE[2], "delta", "message", "tool_calls", "id")
_want(&_COHERE[3], "delta", "message", "tool_calls", "function", "name")
_want(&_COHERE[4], "delta", "message", "tool_calls", "function", "arguments")
_want(&_COHERE[5], "delta", "message", "content", "text")
_want(&_COHERE[6], "delta", "message", "tool_plan")
_want(&_COHERE[7], "delta", "message", "content", "thinking")
# gemini: a chunk with one candidate (or none) …
_want(&_GEMINI[0], "candidates")
_GEMINI[0].allowed = _ANY | CS_T_ARRAY
_want(&_GEMINI[1], "candidates", "#0", "index")
_want(&_GEMINI[2], "candidates", "#0", "finishReason")
_want(&_GEMINI[3], "candidates", "#0", "content", "parts")
_GEMINI[3].allowed = _ANY | CS_T_ARRAY
_want(&_GEMINI[4], "usageMetadata")
_want(&_GEMINI[5], "error")
_want(&_GEMINI[6], "candidates", "#0")
_want(&_GEMINI[7], "candidates", "#0", "content")
# … or, read in one pass, the commonest Vertex chunk: the next piece of a string argument
_want(&_GEMINI_PIECE[0], "candidates")
_GEMINI_PIECE[0].allowed = _ANY | CS_T_ARRAY
_want(&_GEMINI_PIECE[1], "candidates", "#0", "index")
_want(&_GEMINI_PIECE[2], "candidates", "#0", "finishReason")
_want(&_GEMINI_PIECE[3], "usageMetadata")
_want(&_GEMINI_PIECE[4], "error")
_want(&_GEMINI_PIECE[5], "candidates", "#0", "content", "parts")
_GEMINI_PIECE[5].allowed = _ANY | CS_T_ARRAY
for _k in range(6, 12):
    _want(&_GEMINI_PIECE[_k], "candidates", "#0", "content", "parts", "#0")
    _GEMINI_PIECE[_k].path[5] = "functionCall"
_GEMINI_PIECE[7].path[6] = "name"
_GEMINI_PIECE[8].path[6] = "partialArgs"
for _k in range(9, 12):
    _GEMINI_PIECE[_k].path[6] = "partialArgs"
    _GEMINI_PIECE[_k].path[7] = "#0"
_GEMINI_PIECE[9].path[8] = "jsonPath"
_GEMINI_PIECE[10].path[8] = "stringValue"
_GEMINI_PIECE[11].path[8] = "willContinue"
_GEMINI_PIECE[8].allowed = _ANY | CS_T_ARRAY
# … each of its parts …
_want(&_GEMINI_PART[0], "text")
_want(&_GEMINI_PART[1], "thought")
_want(&_GEMINI_PART[2], "functionCall")
_want(&_GEMINI_PART[3], "functionCall", "name")
_want(&_GEMINI_PART[4], "functionCall", "id")
_want(&_GEMINI_PART[5], "functionCall", "args")
_want(&_GEMINI_PART[6], "functionCall", "willContinue")
_want(&_GEMINI_PART[7], "functionCall", "partialArgs")
_GEMINI_PART[7].allowed = _ANY | CS_T_ARRAY
_want(&_GEMINI_PART[8], "thoughtSignature")  # kept on its part by the turn
# … and each entry of a part's partialArgs: its path, the adapter's value keys in order, the marker
cdef tuple _VALUE_KEYS = _gemini.VALUE_KEYS
cdef tuple _VALUE_KEYS_UTF8 = tuple(key.encode() for key in _VALUE_KEYS)  # the table points into these
assert len(_VALUE_KEYS) == 6, "_GEMINI_ENTRY holds six value keys"
_want(&_GEMINI_ENTRY[0], "jsonPath")
for _k in range(6):
    _want(&_GEMINI_ENTRY[1 + _k], <const char *>(<bytes>_VALUE_KEYS_UTF8[_k]))
del _k
_want(&_GEMINI_ENTRY[7], "willContinue")

_FORMAT_CODES = _registry.FAST_CODES  # name -> the FMT_* code above, declared per format there
# Event types whose adapter does nothing with them: the fast path only validates them.
_RESPONSES_HANDLED = frozenset(kind.encode() for kind in _responses.HANDLED_EVENTS)
_COHERE_IGNORED = frozenset(kind.encode() for kind in _cohere.IGNORED_EVENTS)
