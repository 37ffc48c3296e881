"""Posting a payload to a webhook, with retries and backoff; what was sent, in a ledger.

A failed delivery is reported (a :class:`Delivery` that says why), never raised: a
notification must not change a run's result. The receiver is not trusted: only an http(s)
URL is posted to, a redirect is a failed delivery (following it would turn the POST into a
GET without its body, to wherever the receiver says), at most :data:`MAX_RESPONSE_BYTES` of
an answer are read, and the whole delivery, retries included, ends by its deadline however
slowly a receiver answers (a socket timeout bounds each read only, not a receiver sending a
byte every few seconds). The URL is a secret (a Slack webhook's path is its key): no error
quotes it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ATTEMPTS = 4  # one try and three retries
BACKOFF_S = 1.0  # the first wait; each retry waits twice the last
TIMEOUT_S = 10.0  # one attempt, from connecting to the last byte read
DEADLINE_S = 30.0  # the whole delivery: every attempt and every wait
MAX_RESPONSE_BYTES = 64 << 10  # of a receiver's answer (only its status matters)
LEDGER_FILE = "notifications.sqlite"
TIMED_OUT = "no complete answer within"
WEBHOOK_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Delivery:
    ok: bool
    attempts: int
    error: str = ""  # why the last attempt failed (the URL is never part of it)


def webhook_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be posted to (None: it can): an http(s) URL with a host and a numeric
    port, nothing else. The reason never quotes the URL."""
    expected = "expected an http:// or https:// URL"
    if not url.isprintable() or re.search(r"\s", url):
        return f"{expected}, got text with a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it is a number in range)
    except ValueError:
        return f"{expected}, got one whose host or port cannot be read"
    scheme = parts.scheme.lower()
    if scheme not in WEBHOOK_SCHEMES:
        # A scheme-less "host:port/path" parses with the host as its scheme: name only a plain one.
        shown = f"scheme {scheme!r}" if scheme.isalpha() and len(scheme) <= 10 else "no scheme"
        return f"{expected}, got {shown}"
    if not parts.hostname:
        return f"{expected}, got one without a host"
    return None


def _transient(status: int) -> bool:
    return status == 429 or status >= 500


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    attempts: int = ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    timeout_s: float = TIMEOUT_S,
    deadline_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """POST ``body`` as JSON; retry 429, 5xx and connection failures with exponential backoff,
    all within ``deadline_s`` (default :data:`DEADLINE_S`, read when called). Never raises."""
    problem = webhook_url_problem(url)
    if problem is not None:
        return Delivery(False, 0, problem)
    deadline_s = DEADLINE_S if deadline_s is None else deadline_s
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    deadline = time.monotonic() + deadline_s
    error = ""
    for attempt in range(1, attempts + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Delivery(False, attempt - 1, error or f"no answer within {deadline_s:g}s")
        error, retry = _attempt(url, data, min(timeout_s, remaining))
        if not error:
            return Delivery(True, attempt)
        if not retry:
            return Delivery(False, attempt, error)
        wait = backoff_s * 2 ** (attempt - 1)
        if attempt < attempts:
            if wait >= deadline - time.monotonic():
                why = (
                    "" if error.startswith(TIMED_OUT) else f" (no time left to retry within {deadline_s:g}s)"
                )
                return Delivery(False, attempt, error + why)
            sleep(wait)
    return Delivery(False, attempts, error)


def _attempt(url: str, data: bytes, seconds: float) -> tuple[str, bool]:
    """One POST, ended after ``seconds`` whatever the receiver does: ('', _) when it was
    accepted (2xx), else (why not, whether to retry)."""
    watchdog = _Watchdog(seconds)
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    try:
        # Once open, the message was accepted (2xx): its answer is read, bounded, and dropped; a
        # receiver that stalls or breaks off there did take it, so it is not sent again.
        with (
            watchdog,
            _opener(watchdog).open(request, timeout=seconds) as response,
            contextlib.suppress(Exception),
        ):
            response.read(MAX_RESPONSE_BYTES)
        return "", False
    except urllib.error.HTTPError as exc:
        exc.close()
        status = f"HTTP {exc.code} {_shown(str(exc.reason), url)}"
        if 300 <= exc.code < 400:
            return f"{status}: redirects are not followed", False
        return status, _transient(exc.code)
    except Exception as exc:  # whatever a receiver makes the client raise, a delivery never does
        if watchdog.expired.is_set():
            return f"{TIMED_OUT} {seconds:g}s", True
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        said = _shown(str(reason), url)
        if isinstance(reason, OSError):
            return f"connection failed: {type(reason).__name__}: {said}", True
        return f"the receiver's answer is not HTTP: {type(reason).__name__}: {said}", False


def _shown(text: str, url: str, limit: int = 200) -> str:
    """What a receiver or the client said, safe to print: without the URL or any of its parts
    (a receiver may echo them), without control characters (a terminal would obey them), cut."""
    parts = urlsplit(url)
    segments = [segment for segment in parts.path.split("/") if len(segment) >= 6]  # a key, in Slack's
    for part in (url, parts.netloc + parts.path, parts.path, parts.query, parts.netloc, *segments):
        if len(part) > 1:
            text = text.replace(part, "…")
    text = "".join(char if char.isprintable() else "?" for char in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Watchdog:
    """Shuts the socket of every connection of one attempt when its time is up, so a read
    blocked on a slow receiver returns at once."""

    def __init__(self, seconds: float) -> None:
        self.expired = threading.Event()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connections.append(connection)

    def _expire(self) -> None:
        self.expired.set()  # first: a connection that opens after this sees it (see _watched)
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            if connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], watchdog: _Watchdog) -> Any:
    class Watched(base):  # type: ignore[valid-type, misc]
        def connect(self) -> None:
            watchdog.watch(self)
            super().connect()
            if watchdog.expired.is_set():
                raise TimeoutError("the delivery's time ran out while connecting")

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._connection = _watched(http.client.HTTPConnection, watchdog)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._connection = _watched(http.client.HTTPSConnection, watchdog)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)  # the default context: certificates checked


def _opener(watchdog: _Watchdog) -> urllib.request.OpenerDirector:
    """http(s) only, through the environment's proxies, and no redirect handler: a 3xx is an
    HTTPError like a 4xx."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        _HTTPHandler(watchdog),
        _HTTPSHandler(watchdog),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class Ledger:
    """The messages sent, one row per channel, series, event and night (SQLite, so the daemon's
    sensor and a CLI run on one instance share it safely)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with self._connect() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS sent (channel TEXT, series TEXT, event TEXT, night TEXT, "
                "run_id TEXT, sent_at TEXT, PRIMARY KEY (channel, series, event, night))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def sent(self, channel: str, key: tuple[str, str, str]) -> bool:
        with self._connect() as con:
            row = con.execute(
                "SELECT 1 FROM sent WHERE channel = ? AND series = ? AND event = ? AND night = ?",
                (channel, *key),
            ).fetchone()
        return row is not None

    def record(self, channel: str, key: tuple[str, str, str], run_id: str) -> None:
        with self._connect() as con:
            con.execute(
                "INSERT OR IGNORE INTO sent VALUES (?, ?, ?, ?, ?, ?)",
                (channel, *key, run_id, datetime.now(UTC).isoformat()),
            )


def instance_ledger(storage_directory: str) -> Ledger:
    """The ledger in a Dagster instance's storage folder."""
    return Ledger(Path(storage_directory) / LEDGER_FILE)
