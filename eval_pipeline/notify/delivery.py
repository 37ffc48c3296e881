"""Posting a payload to a webhook, with retries and backoff; what was sent, in a ledger.

A failed delivery is reported (a :class:`Delivery` that says why), never raised: a
notification must not change a run's result."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ATTEMPTS = 4  # one try and three retries
BACKOFF_S = 1.0  # the first wait; each retry waits twice the last
TIMEOUT_S = 10.0
LEDGER_FILE = "notifications.sqlite"


@dataclass(frozen=True)
class Delivery:
    ok: bool
    attempts: int
    error: str = ""  # why the last attempt failed (the URL is never part of it)


def _transient(status: int) -> bool:
    return status == 429 or status >= 500


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    attempts: int = ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    timeout_s: float = TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """POST ``body`` as JSON; retry 429, 5xx and connection failures with exponential backoff."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    error = ""
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(
            url, data=data, method="POST", headers={"Content-Type": "application/json; charset=utf-8"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                response.read()
            return Delivery(True, attempt)
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code} {exc.reason}"
            if not _transient(exc.code):
                return Delivery(False, attempt, error)
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            error = f"connection failed: {type(reason).__name__}: {reason}"
        if attempt < attempts:
            sleep(backoff_s * 2 ** (attempt - 1))
    return Delivery(False, attempts, error)


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
