"""``openai:<base_url>``: any OpenAI-compatible chat-completions server, via the official SDK.

A session is the growing message list: each turn sends every earlier user and assistant
message plus the new prompt, and a turn that fails leaves the list as it was, so the
driver can retry it. Requests go out from one asyncio event loop (``AsyncOpenAI``) on a
background thread, at most ``max_concurrency`` at a time across all sessions. The SDK's
own retries are off; the driver's single retry loop retries transient faults (429, 5xx,
timeouts, connection errors) with exponential backoff that honours ``Retry-After``.

Concurrency adapts to throttling (:class:`~eval_pipeline.runtimes.faults.AdaptiveLimit`): a
429 or 503 halves the requests this target may have in flight and holds every request back
until its ``Retry-After`` has passed; each answer adds back a fraction, up to
``max_concurrency``. A server that throttles is sent what it can take instead of a steady
stream of refusals.

Options (``--runtime-option KEY=VALUE``):

- ``model`` (required): the model name sent with every request.
- ``api_key_env``: name of the environment variable holding the API key (default
  ``OPENAI_API_KEY``; when that default is unset a placeholder key is sent, which local
  servers accept). The key itself is never an option, never in ``spec``, never logged.
- ``headers``: extra request headers; ``header_envs``: header name → environment variable
  for header values that are secrets.
- ``max_concurrency`` (16), ``timeout_s`` (60: the whole request, connect to last byte, each
  attempt), ``max_retries`` (3),
  ``backoff_s`` (0.5), ``max_backoff_s`` (30).
- ``response_fields``: TurnResponse field → dotted path into the response JSON, e.g.
  ``{"grounding_source": "choices.0.message.x_grounding"}``. A field it does not map is read
  at ``choices.0.message.<field>``, beside ``content`` (where ``serve-reference`` sends it);
  a reply without it leaves the field null: not supplied, which the run reports.
- ``system_prompt``: an optional first system message; ``request_params``: extra
  request-body parameters (``temperature``, ``seed``...).
- ``stream`` (false; ``request_params={"stream": true}`` means the same): ask for a streamed
  reply, assemble its chunks, and record time to first token (``ttft_ms``) in ``raw``; the
  request asks for the usage chunk (``stream_options.include_usage``) unless
  ``stream_usage`` is false (for a server that refuses the field).
- ``call_id_headers`` (``["x-request-id", "x-litellm-call-id"]``): response headers naming
  the call in the gateway's logs; those present go to ``raw.call_ids`` and into error messages.
- ``tool_call_surface`` (``empty``): what a reply with tool calls shows as its surface besides
  its text: nothing (``empty``) or the calls as JSON (``json``).
- ``max_reply_bytes`` (1 MB): the most a reply's body (a streamed reply's every chunk
  together) may hold. It is enforced while reading: a larger reply (or one whose
  ``Content-Length`` says so) is that turn's ``reply_too_large`` fault, never read whole.

A reply is an answer whenever it has ``choices[0].message``: ``content: null`` is an empty
surface, and tool calls are kept in ``raw``. Per turn, ``raw`` holds the response ``id``,
model name, finish reason, token usage, tool calls and call ids. A body (or streamed chunk)
is read by the strict JSON reader of case files: a key twice, ``NaN`` or a lone surrogate
escape is a malformed reply, that turn's fault. Objects and lists reached by
``response_fields`` are stored as JSON. An error names the URL (never credentials), the HTTP
status, the server's message (first 500 characters) or the underlying cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eval_pipeline.cases.jsonl import LineProblem, parse_json_line
from eval_pipeline.runtimes.adapters.openai_replies import (
    ReplyError,
    StreamAssembly,
    ToolCallSurface,
    call_ids,
    cause_text,
    field_text,
    first_message,
    read_path,
    redact,
    reply_surface,
    server_message,
    shorten,
    sse_payload,
)
from eval_pipeline.runtimes.base import Capabilities, ChatSession, RuntimeSpecError, TurnResponse
from eval_pipeline.runtimes.faults import THROTTLE_STATUS, AdaptiveLimit, RetryPolicy, TurnFault
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.redaction import url_secrets
from eval_pipeline.runtimes.registry import register_runtime

if TYPE_CHECKING:
    # The SDK takes a second or more to import: it is loaded when an openai runtime is built,
    # not by every command that looks a runtime scheme up.
    from openai import AsyncAPIResponse

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "not-needed"  # sent to servers that ask for no key (the SDK requires one)
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

ResponseField = Literal["grounding_source", "surface_tag", "epistemic_status"]
RESPONSE_FIELDS: tuple[ResponseField, ...] = get_args(ResponseField)

T = TypeVar("T")


class OpenAIOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    header_envs: dict[str, str] = Field(default_factory=dict)
    max_concurrency: int = Field(16, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    max_backoff_s: float = Field(30.0, ge=0)
    response_fields: dict[ResponseField, str] = Field(default_factory=dict)
    system_prompt: str | None = None
    request_params: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False
    stream_usage: bool = True
    call_id_headers: list[str] = Field(default_factory=lambda: ["x-request-id", "x-litellm-call-id"])
    tool_call_surface: ToolCallSurface = "empty"
    max_reply_bytes: int = Field(1_000_000, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _stream_from_request_params(cls, data: Any) -> Any:
        """``request_params={"stream": true}`` is how people ask for streaming: make it the option."""
        params = data.get("request_params") if isinstance(data, dict) else None
        if not isinstance(params, dict) or "stream" not in params:
            return data
        rest = {k: v for k, v in params.items() if k != "stream"}
        if "stream" in data and data["stream"] != params["stream"]:
            raise ValueError("stream and request_params.stream disagree")
        return {**data, "request_params": rest, "stream": params["stream"]}


def public_url(url: str) -> str:
    """``url`` without credentials, query or fragment: safe for the runtime column and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429/503 asked to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or an
    HTTP date); None when neither is there or readable (``inf`` and ``nan`` are no number of
    seconds)."""
    with contextlib.suppress(KeyError, ValueError):
        return _seconds(float(headers["retry-after-ms"]) / 1000.0)
    text = headers.get("retry-after", "")
    with contextlib.suppress(ValueError):
        return _seconds(float(text))
    with contextlib.suppress(ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(text).timestamp() - time.time())
    return None


def _seconds(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"not a number of seconds: {value}")
    return value


def _secret(env: str, *, required: bool) -> str | None:
    value = os.environ.get(env)
    if not value and required:
        raise RuntimeSpecError(f"openai runtime: environment variable {env} is not set")
    return value or None


def strict_json(body: bytes) -> dict[str, Any] | str:
    """A reply body (or streamed chunk) read by the strict JSON reader of case files and
    ``exec:`` replies: a key twice, ``NaN``, a lone surrogate or deep nesting is refused, never
    "the last one wins". The object, or what is wrong with it (``field: message``)."""
    document = parse_json_line(body)
    if isinstance(document, LineProblem):
        where = "" if document.field == "(line)" else f"{document.field}: "
        return f"{where}{document.message}"
    return document


class _EventLoopThread:
    """An asyncio loop on a daemon thread; sync callers submit coroutines and wait."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="openai-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


@dataclass
class _Sent:
    """One request through the gate: the limit's epoch it was sent in, and how it ended."""

    epoch: int
    answered: bool = False
    throttled: bool = False
    retry_after: float | None = None


class _AdaptiveGate:
    """The target's :class:`AdaptiveLimit` as an asyncio gate: a request waits for a slot, and
    for the end of the latest ``Retry-After``."""

    def __init__(self, maximum: int, max_wait_s: float) -> None:
        self.limit = AdaptiveLimit(maximum, max_wait_s=max_wait_s)
        self.in_flight = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[_Sent]:
        async with self._changed:
            while True:
                wait = self.limit.resume_at - time.monotonic()
                if wait <= 0 and self.in_flight < self.limit.slots:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=wait if wait > 0 else None)
            self.in_flight += 1
            sent = _Sent(self.limit.epoch)
        try:
            yield sent
        finally:
            async with self._changed:
                self.in_flight -= 1
                if sent.throttled:
                    self.limit.throttled(sent.epoch, time.monotonic(), sent.retry_after)
                elif sent.answered:
                    self.limit.answered()
                self._changed.notify_all()


class _StatusReply(Exception):
    """A whole reply's 4xx or 5xx status, its body read (the SDK's ``APIStatusError`` for a
    request sent past the SDK)."""

    def __init__(self, response: Any) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _timeout_errors() -> tuple[type[BaseException], ...]:
    """A request that timed out: the SDK's error, the whole request's deadline, the HTTP client's."""
    import httpx2
    import openai

    return (openai.APITimeoutError, TimeoutError, httpx2.TimeoutException)


def _connection_errors() -> tuple[type[BaseException], ...]:
    """A request whose connection failed: the SDK's error, and what the SDK wraps in it when its
    HTTP client raises it (for a request sent past the SDK)."""
    import ssl

    import anyio
    import httpx2
    import openai

    return (openai.APIConnectionError, httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)


class OpenAIRuntime:
    def __init__(self, base_url: str, options: OpenAIOptions) -> None:
        from openai import AsyncOpenAI

        from eval_pipeline.runtimes.openai_pool import http_client

        self.base_url = base_url
        self.options = options
        self.spec = f"openai:{public_url(base_url)}"
        self.endpoint = "POST " + public_url(base_url).rstrip("/") + "/chat/completions"
        # A sample's seed goes in the request body's ``seed`` (servers that honour it reproduce the answer).
        self.capabilities = Capabilities(
            retry=RetryPolicy(options.max_retries, options.backoff_s, options.max_backoff_s),
            concurrency=options.max_concurrency,
            seeded=True,
        )
        key_env = options.api_key_env or DEFAULT_KEY_ENV
        api_key = _secret(key_env, required=options.api_key_env is not None) or PLACEHOLDER_KEY
        headers = dict(options.headers)
        for header, env in options.header_envs.items():
            headers[header] = _secret(env, required=True) or ""
        # Kept only to scrub them from server messages that echo a request back.
        self._secrets = [api_key, *(headers[h] for h in options.header_envs), *url_secrets(base_url)]
        self._http = http_client()
        self._client = AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            default_headers=headers,
            max_retries=0,
            timeout=options.timeout_s,
            http_client=self._http,
        )
        # A whole reply's request, but for its body, is the same every turn: made once, at the
        # URL the SDK itself would post to (a query in the base URL lands where the SDK puts it).
        self._url = str(self._client._prepare_url("/chat/completions"))
        self._headers: dict[str, str] | None = None  # the SDK's, read in the event loop (they name it)
        self._limit = _AdaptiveGate(options.max_concurrency, options.max_backoff_s)
        self._loop = _EventLoopThread()

    @property
    def adaptive_limit(self) -> AdaptiveLimit:
        """The requests this target may have in flight now, as its throttling has adapted them."""
        return self._limit.limit

    def open_session(self, session_id: str, seed: int | None = None) -> ChatSession:
        return OpenAISession(self, seed)

    def complete(self, messages: list[dict[str, str]], seed: int | None) -> TurnResponse:
        return self._loop.run(self._complete(messages, seed))

    def _extra_body(self, seed: int | None) -> dict[str, Any] | None:
        body = {**self.options.request_params, **({} if seed is None else {"seed": seed})}
        return body or None

    async def _complete(self, messages: list[dict[str, str]], seed: int | None) -> TurnResponse:
        import openai  # loaded already: the client was built with the runtime

        async with self._limit.slot() as sent:
            try:
                # The SDK's timeout bounds each read, so a server dripping a byte at a time never
                # trips it: the whole request, connect to last byte, has ``timeout_s``.
                async with asyncio.timeout(self.options.timeout_s):
                    if self.options.stream:
                        response = await self._streamed(messages, seed)
                    else:
                        response = await self._whole(messages, seed)
                sent.answered = True
                return response
            except _timeout_errors():
                raise TurnFault(
                    f"timed out after {self.options.timeout_s:g}s: {self.endpoint}", transient=True
                ) from None
            except _connection_errors() as exc:
                raise TurnFault(
                    f"connection failed: {self.endpoint}: {cause_text(exc)}", transient=True
                ) from None
            except (openai.APIStatusError, _StatusReply) as exc:
                status, reply = exc.response.status_code, exc.response
                retry_after = retry_after_s(reply.headers)
                if status in THROTTLE_STATUS:
                    sent.throttled, sent.retry_after = True, retry_after
                raise TurnFault(
                    self._described(f"HTTP {status}", server_message(reply.text), reply.headers),
                    transient=status in TRANSIENT_STATUS,
                    retry_after=retry_after,
                ) from None

    async def _whole(self, messages: list[dict[str, str]], seed: int | None) -> TurnResponse:
        # Sent by the SDK's HTTP client with the SDK's headers, but not through the SDK's request
        # path: its per-request copies of the options, header merging and auth wrapping cost
        # more CPU than the turn's own work, and the driver reads a handful of fields of the
        # reply. The body is serialized as the SDK does (``openapi_dumps``), and the reply read
        # here as it arrives, up to ``max_reply_bytes``; a 4xx/5xx is read whole, as by the SDK.
        from openai._utils._json import openapi_dumps

        if self._headers is None:
            sdk_headers = {**self._client.auth_headers, **self._client.default_headers}
            self._headers = {name: value for name, value in sdk_headers.items() if isinstance(value, str)}
        body = {"model": self.options.model, "messages": messages, **(self._extra_body(seed) or {})}
        request = self._http.build_request(
            "POST",
            self._url,
            content=openapi_dumps(body),
            headers=self._headers,
            timeout=self.options.timeout_s,
        )
        http = await self._http.send(request, stream=True)
        try:
            if http.is_error:
                await http.aread()
                raise _StatusReply(http)
            reply = bytearray()
            async for piece in self._capped(http):
                reply += piece
        finally:
            await http.aclose()
        return self._turn_response(self._body_document(bytes(reply), http.headers), http.headers, {})

    async def _capped(self, http: Any) -> AsyncIterator[bytes]:
        """The body of ``http`` as it arrives; a ``reply_too_large`` fault as soon as it (or its
        ``Content-Length``) passes ``max_reply_bytes``."""
        limit = self.options.max_reply_bytes
        with contextlib.suppress(KeyError, ValueError):
            if int(http.headers["content-length"]) > limit:
                raise self._too_large(http.headers)
        read = 0
        async for piece in http.aiter_bytes():
            read += len(piece)
            if read > limit:
                raise self._too_large(http.headers)
            yield piece

    def _too_large(self, headers: Mapping[str, str]) -> TurnFault:
        return TurnFault(
            self._described(
                "reply_too_large: a reply",
                f"over max_reply_bytes ({self.options.max_reply_bytes} bytes); not read further",
                headers,
            ),
            kind="reply_too_large",
        )

    def _body_document(self, body: bytes, headers: Mapping[str, str]) -> Any:
        """The JSON of a whole reply body, else a fault quoting the start of the body."""
        document = strict_json(body.removeprefix(b"\xef\xbb\xbf"))  # a UTF-8 BOM is no fault
        if isinstance(document, str):
            shown = body[:400].decode("utf-8", "replace")
            raise self._malformed(f"the body: {document}: {shorten(shown, 200)!r}", headers)
        return document

    async def _streamed(self, messages: list[dict[str, str]], seed: int | None) -> TurnResponse:
        from openai import omit  # loaded already: the client was built with the runtime

        started = time.perf_counter()
        async with self._client.chat.completions.with_streaming_response.create(
            model=self.options.model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True} if self.options.stream_usage else omit,
            timeout=self.options.timeout_s,
            extra_body=self._extra_body(seed),
        ) as reply:
            headers = reply.headers
            if "text/event-stream" not in headers.get("content-type", ""):
                # A server that ignores ``stream`` answers with a whole completion.
                body = bytearray()
                async for piece in self._capped(reply.http_response):
                    body += piece
                return self._turn_response(self._body_document(bytes(body), headers), headers, {})
            assembly, first_token_s = await self._assemble(reply, started)
        try:
            document = assembly.document()
        except ReplyError as exc:
            raise self._malformed(str(exc), headers) from None
        ttft_ms = None if first_token_s is None else round(first_token_s * 1000.0, 3)
        return self._turn_response(document, headers, {"ttft_ms": ttft_ms, "chunks": assembly.chunks})

    async def _assemble(
        self, reply: AsyncAPIResponse[Any], started: float
    ) -> tuple[StreamAssembly, float | None]:
        """The streamed chunks folded together, and the seconds until the first one carrying a token."""
        assembly = StreamAssembly()
        first_token_s: float | None = None
        lines = _lines(self._capped(reply.http_response))
        while True:
            try:
                line = await anext(lines)
            except StopAsyncIteration:
                return assembly, first_token_s
            except TurnFault:
                raise
            except Exception as exc:  # the transport's read errors are not the SDK's: name the cause
                raise TurnFault(
                    self._described(
                        "stream broke off",
                        f"after {assembly.chunks} chunks: {cause_text(exc)}",
                        reply.headers,
                    ),
                    transient=True,
                ) from None
            payload = sse_payload(line)
            if payload is None:
                continue
            chunk = strict_json(payload.encode("utf-8", "surrogatepass"))
            try:
                if isinstance(chunk, str):
                    raise ReplyError(chunk)
                carried_token = assembly.add(chunk)
            except ReplyError as exc:
                raise self._malformed(
                    f"chunk {assembly.chunks + 1}: {shorten(str(exc), 200)}", reply.headers
                ) from None
            if carried_token and first_token_s is None:
                first_token_s = time.perf_counter() - started

    def _described(self, what: str, detail: str, headers: Mapping[str, str]) -> str:
        """One error line: what failed, where, the server's words, and the call ids to look it up by."""
        ids = call_ids(headers, self.options.call_id_headers)
        suffix = "".join(f" [{name}: {value}]" for name, value in ids.items())
        return f"{what} from {self.endpoint}: {redact(detail, self._secrets)}{suffix}"

    def _malformed(self, detail: str, headers: Mapping[str, str]) -> TurnFault:
        return TurnFault(self._described("malformed reply", detail, headers))

    def _turn_response(
        self, document: Any, headers: Mapping[str, str], extra_raw: dict[str, Any]
    ) -> TurnResponse:
        try:
            message = first_message(document)
            surface = reply_surface(message, self.options.tool_call_surface)
        except ReplyError as exc:
            raise self._malformed(str(exc), headers) from None
        # A field not mapped is read where serve-reference puts it, beside ``content``; a server
        # that sends no such field leaves it null (not supplied), never a made-up "none".
        fields: dict[str, Any] = {
            name: field_text(
                read_path(document, self.options.response_fields.get(name, f"choices.0.message.{name}"))
            )
            for name in RESPONSE_FIELDS
        }
        raw: dict[str, Any] = {
            "id": read_path(document, "id"),
            "model": read_path(document, "model"),
            "finish_reason": read_path(document, "choices.0.finish_reason"),
            **extra_raw,
        }
        if message.get("tool_calls"):
            raw["tool_calls"] = message["tool_calls"]
        usage = read_path(document, "usage")
        if isinstance(usage, dict):
            raw["usage"] = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        if ids := call_ids(headers, self.options.call_id_headers):
            raw["call_ids"] = ids
        return TurnResponse(surface=surface, raw=raw, **fields)

    def close(self) -> None:
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.stop()


async def _lines(pieces: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of a byte stream (``\\n``, ``\\r\\n`` or ``\\r`` endings), as text. A line is
    never longer than the stream, which :meth:`OpenAIRuntime._capped` bounds."""
    pending = b""
    async for piece in pieces:
        pending += piece
        *complete, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        for line in complete:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


class OpenAISession:
    """One conversation: the message list grows by a user and an assistant message per answered turn."""

    def __init__(self, runtime: OpenAIRuntime, seed: int | None) -> None:
        self._runtime = runtime
        self._seed = seed
        system = runtime.options.system_prompt
        self.messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []

    def send(self, prompt: str) -> TurnResponse:
        request = [*self.messages, {"role": "user", "content": prompt}]
        response = self._runtime.complete(request, self._seed)
        self.messages = [*request, {"role": "assistant", "content": response.surface}]
        return response

    def close(self) -> None:
        pass


@register_runtime("openai", OpenAIOptions)
def openai_runtime(argument: str, options: Mapping[str, Any]) -> OpenAIRuntime:
    parts = urlsplit(argument)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RuntimeSpecError(
            f"openai runtime needs a base URL: openai:http(s)://host[:port]/v1, got {public_url(argument)!r}"
        )
    return OpenAIRuntime(argument, validate_options("openai", OpenAIOptions, options))
