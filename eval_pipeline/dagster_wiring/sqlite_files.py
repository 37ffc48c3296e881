"""Keep a local instance's SQLite files open while a lane runs, so each event costs its commit only.

Dagster's SQLite storages open a connection for every write and close it right after. In WAL
mode the last connection to close a database checkpoints it and deletes its WAL and
shared-memory files: an fsync and file churn for every event, and a lane run stores a hundred
or so (step, input, output, materialization and check events; asset events twice, in the run's
file and in the index). While one idle connection per file stays open, those closes are not the
last, and the checkpoint happens once, when the keeper closes. What is stored is unchanged;
storages that are not SQLite files (Postgres) are left alone.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool


def _database_file(connection: sqlite3.Connection) -> str:
    """The file of the connection's main database ('' in memory)."""
    for _, name, path in connection.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path or "")
    return ""


@contextmanager
def sqlite_files_kept_open() -> Iterator[None]:
    """Within the block, every SQLite file a storage writes stays open (one idle connection each)
    until the block ends."""
    keepers: dict[str, sqlite3.Connection] = {}
    lock = threading.Lock()

    def keep(dbapi_connection: Any, _record: Any) -> None:
        # On check-in the storage's work is committed and the file is in WAL mode already: a
        # keeper opened now joins the WAL (its first read maps the shared memory).
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        path = _database_file(dbapi_connection)
        with lock:
            if not path or path in keepers:
                return
            keeper = sqlite3.connect(path, check_same_thread=False)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()
            keepers[path] = keeper

    event.listen(Pool, "checkin", keep)
    try:
        yield
    finally:
        event.remove(Pool, "checkin", keep)
        with lock:
            for keeper in keepers.values():
                keeper.close()
            keepers.clear()
