"""Write a stream as a whole turn instead of one record per call: --emit turns and --emit chat-messages.

``turns``: one record per stream with the provider's own response (Result.to_response()), the
stream's format and every error met (the stream's and its calls'), plus the request when a log
line carried one (--request-field). ``chat-messages``: one line per choice of a clean OpenAI-chat
stream, ``{"messages": [...the request's messages, the assistant message], "tools": [...]}``, the
OpenAI fine-tuning shape; a stream that is cut, failed or has no request is not training data and
is reported instead of written.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from .._records import Unwritable, to_json

EMITS = ("calls", "turns", "chat-messages")

Problem = Callable[[str, str], None]  # (kind, message), recorded on the stream


def check_emit(emit: str, request_field: Any) -> None:
    """Raise ValueError for an emit callstitch does not know, or chat-messages without a request."""
    if emit not in EMITS:
        raise ValueError(f"unknown emit {emit!r}; known: {', '.join(EMITS)}")
    if emit == "chat-messages" and not request_field:
        raise ValueError("emit 'chat-messages' needs the request of each log line: name its field with "
                         "request_field (--request-field), e.g. 'request'")


def error_texts(result: Any) -> list[str]:
    """Return every error of a stream as text: the stream's own, then its calls'."""
    texts = [str(e) for e in result.errors]
    texts += [str(call.error) for call in result.tool_calls if call.error is not None]
    return texts


def response_json(result: Any, problem: Problem) -> tuple[bytes | None, list[str]]:
    """Return a stream's response (Result.to_response()) as JSON, or None when it has none, and its errors as texts.

    A stream of no recognised format has no turn: its errors say so. A response no writer can
    write (nested deeper than _records.MAX_DEPTH) or a failure building it is a problem reported
    through problem(kind, message), and the response is None; nothing of it stops the batch.
    """
    errors = error_texts(result)
    try:
        response = result.to_response()
    except ValueError as exc:
        errors.append(str(exc))
        return None, errors
    except Exception as exc:  # noqa: BLE001 - one stream's turn must not stop the batch
        message = f"{type(exc).__name__}: {exc} (please report this)"
        problem("turn not built", message)
        errors.append(f"turn not built: {message}")
        return None, errors
    try:
        return to_json(response), errors
    except Unwritable as exc:
        message = f"the response is {exc}: written as null"
        problem("turn not written", message)
        errors.append(f"turn not written: {message}")
        return None, errors


def turn_line(result: Any, request: Any, problem: Problem) -> bytes:
    """Return one stream's turn record as a JSON line (without source and stream: the collector adds them)."""
    response, errors = response_json(result, problem)
    line = (b'{"format":' + orjson.dumps(result.format) + b',"complete":' + (b"true" if result.complete else b"false")
            + b',"response":' + (b"null" if response is None else response) + b',"errors":' + to_json(errors))
    if request is not None:
        try:
            line += b',"request":' + to_json(request)
        except Unwritable as exc:  # it parsed from the log line, so this is all but impossible
            problem("turn not written", f"the request is {exc}: left out")
    return line + b"}\n"


def chat_message_lines(result: Any, request: Any, problem: Problem) -> list[bytes]:
    """Return one fine-tuning line per choice of a clean OpenAI-chat stream, or report why there is none."""
    if result.format != "openai-chat":
        problem("not chat", f"chat-messages are OpenAI chat turns; this stream is {result.format}")
        return []
    messages = request.get("messages") if type(request) is dict else None
    if type(messages) is not list:
        problem("no request", "the log line has no request with a 'messages' list at --request-field")
        return []
    errors = error_texts(result)
    if errors or not result.complete:
        why = errors[0] if errors else "the stream has no terminator"
        problem("turn not written", f"not training data: {why}")
        return []
    head: dict[str, Any] = {}
    for key in ("tools", "parallel_tool_calls"):  # what the fine-tuning shape takes besides the messages
        if key in request:
            head[key] = request[key]
    lines = []
    for choice in result.choices or [None]:
        number = 0 if choice is None else choice.index
        line = {"messages": [*messages, result.to_message(number)], **head}
        try:
            lines.append(to_json(line) + b"\n")
        except Unwritable as exc:
            problem("turn not written", f"choice {number}: {exc}")
    return lines
