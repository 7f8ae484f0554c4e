/*
 * scan.h -- everything the compiled twin's fast paths read JSON with, in one
 * compilation unit (the pyx includes this header alone): each header has one
 * job, and they are included in the order the code depends on.
 *
 *   lex.h       spans, string/number/UTF-8 validation, skipping values
 *   keys.h      key ids of a chat chunk's objects
 *   chat.h      the chat.completion.chunk reader (cs_scan_chat_chunk)
 *   unescape.h  decoding a located string's escapes, UTF-8 validity
 *   paths.h     the generic path extractor (cs_extract, cs_items)
 *   ollama.h    the Ollama chat line reader (cs_ollama_line)
 *   compact.h   compact re-encoding as orjson writes it (cs_compact)
 *   digits.h    a run of digits an integer beyond 64 bits needs (cs_long_digit_run)
 *
 * eventstream.h (the AWS event stream's CRC-32 and fields) is included
 * beside it.
 */
#ifndef CALLSTITCH_SCAN_H
#define CALLSTITCH_SCAN_H

#include "lex.h"
#include "keys.h"
#include "chat.h"
#include "unescape.h"
#include "paths.h"
#include "ollama.h"
#include "compact.h"
#include "digits.h"

#endif /* CALLSTITCH_SCAN_H */
