"""What an OpenAI-compatible server said, read into pipeline terms: pure functions, no I/O.

The ``openai:`` adapter moves bytes; this module decides what they mean. A reply (whole or
assembled from streamed chunks) becomes a surface plus ``raw``; an error body becomes the
server's message; a failed connection becomes its underlying cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

MESSAGE_LIMIT = 500  # characters of a server's error message kept in ``error``
REDACTED = "[redacted]"

ToolCallSurface = Literal["empty", "json"]

# Delta fields whose pieces are concatenated; any other delta field keeps its last value.
STREAMED_TEXT_FIELDS = frozenset({"content", "refusal", "reasoning_content", "reasoning"})


class ReplyError(ValueError):
    """A 200 reply that is not a chat completion (the message says what is missing)."""


def read_path(document: Any, path: str) -> Any:
    """The value at a dotted path (``choices.0.message.x``) of nested dicts/lists, else None."""
    value = document
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def field_text(value: Any) -> str | None:
    """A response field as stored: strings as they are, anything else as JSON (never a Python repr)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def message_text(content: Any) -> str:
    """The text of ``message.content``: a string, null (no text), or a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        return "".join(part for part in parts if isinstance(part, str))
    raise ReplyError(f"choices[0].message.content is a {type(content).__name__}, not text")


def reply_surface(message: dict[str, Any], rendering: ToolCallSurface) -> str:
    """The surface of an assistant message; tool calls add their JSON when ``rendering`` is ``json``."""
    text = message_text(message.get("content"))
    tool_calls = message.get("tool_calls")
    if rendering == "empty" or not tool_calls:
        return text
    calls = [
        {"name": read_path(call, "function.name"), "arguments": read_path(call, "function.arguments")}
        for call in tool_calls
    ]
    rendered = json.dumps(calls, ensure_ascii=False)
    return f"{text}\n{rendered}" if text else rendered


def first_message(document: Any) -> dict[str, Any]:
    """``choices[0].message`` of a completion, or a :class:`ReplyError` naming what is missing."""
    if not isinstance(document, dict):
        raise ReplyError("the body is not a JSON object")
    message = read_path(document, "choices.0.message")
    if not isinstance(message, dict):
        raise ReplyError("no choices[0].message")
    return message


def server_message(body: str) -> str:
    """The message an error body carries, cut to :data:`MESSAGE_LIMIT` characters.

    OpenAI and LiteLLM send ``{"error": {"message": ...}}``; others send ``{"error": "..."}``,
    ``{"detail": ...}`` (FastAPI) or ``{"message": ...}``; anything else is quoted as it is.
    """
    text = body.strip()
    if not text:
        return "(empty body)"
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        for candidate in (
            read_path(error, "message"),
            error,
            document.get("detail"),
            document.get("message"),
        ):
            if candidate not in (None, "", {}, []):
                text = field_text(candidate) or text
                break
    return shorten(" ".join(text.split()))


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced: servers echo keys back in error messages."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def cause_text(exc: BaseException) -> str:
    """The innermost cause of ``exc`` that says something (``ConnectionRefusedError: [Errno 111] ...``)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for candidate in reversed(chain):
        if str(candidate):
            return f"{type(candidate).__name__}: {candidate}"
    return type(chain[-1]).__name__


def call_ids(headers: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The gateway call-id headers present in a response, by header name (lower case)."""
    found = {name.lower(): headers.get(name) for name in names}
    return {name: value for name, value in found.items() if value}


class StreamAssembly:
    """Streamed ``chat.completion.chunk`` objects folded back into one ``chat.completion``.

    Text deltas are concatenated, tool-call deltas are merged by their ``index`` (arguments
    concatenated), and every other field keeps its last non-null value.
    """

    def __init__(self) -> None:
        self.top: dict[str, Any] = {}
        self.message: dict[str, Any] = {}
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: Any = None
        self.chunks = 0

    def add(self, chunk: Any) -> bool:
        """Fold one chunk in; whether it carried a token (text or a tool-call piece)."""
        if not isinstance(chunk, dict):
            raise ReplyError("a streamed chunk is not a JSON object")
        if "error" in chunk:
            raise ReplyError(f"the stream carried an error: {server_message(json.dumps(chunk))}")
        self.chunks += 1
        for key in ("id", "model", "created", "system_fingerprint", "usage"):
            if chunk.get(key) is not None:
                self.top[key] = chunk[key]
        carried_token = False
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # one completion per request: choice 0
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                carried_token |= self._add_delta(delta)
        return carried_token

    def _add_delta(self, delta: dict[str, Any]) -> bool:
        carried_token = False
        for key, value in delta.items():
            if value is None:
                continue
            if key == "tool_calls" and isinstance(value, list):
                for position, piece in enumerate(value):
                    if isinstance(piece, dict):
                        self._add_tool_call(piece, position)
                        carried_token = True
            elif key in STREAMED_TEXT_FIELDS and isinstance(value, str):
                self.message[key] = self.message.get(key, "") + value
                carried_token |= bool(value)
            else:
                self.message[key] = value
        return carried_token

    def _add_tool_call(self, piece: dict[str, Any], position: int) -> None:
        index = piece.get("index", position)
        call = self.tool_calls.setdefault(index, {"function": {}})
        for key in ("id", "type"):
            if piece.get(key) is not None:
                call[key] = piece[key]
        function = piece.get("function") or {}
        if function.get("name") is not None:
            call["function"]["name"] = function["name"]
        if function.get("arguments") is not None:
            call["function"]["arguments"] = call["function"].get("arguments", "") + function["arguments"]

    def document(self) -> dict[str, Any]:
        """The assembled completion, shaped like a non-streamed reply."""
        if self.chunks == 0:
            raise ReplyError("the stream ended without a chunk")
        message = {"role": "assistant", **self.message}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {**self.top, "object": "chat.completion", "choices": [choice]}


def sse_payload(line: str) -> str | None:
    """The JSON payload of one server-sent-event line; None for comments, blanks, ``event:`` and ``[DONE]``.

    Chat-completion streams put each chunk on a single ``data:`` line, so a line is an event.
    """
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    return None if data in ("", "[DONE]") else data
