"""Make a local instance's SQLite writes cheap while a lane runs: files kept open, commits not synced.

Dagster's SQLite storages open a connection for every write and close it right after, and a
lane run stores a hundred or so events (step, input, output, materialization and check events;
asset events twice, in the run's file and in the index), each its own transaction. Two costs
follow, and both are removed here for the connections opened within the block:

- **Checkpoints.** In WAL mode the last connection to close a database checkpoints it and
  deletes its WAL and shared-memory files. While one idle connection per file stays open,
  those closes are not the last, and the checkpoint happens once, when the keeper closes.
- **A sync per commit.** With SQLite's default ``synchronous=FULL`` every commit waits for the
  disk. In WAL mode ``synchronous=NORMAL`` syncs at checkpoints only and the database stays
  consistent after any crash; what a power loss (not a killed process) can cost is the run's
  last events, and the run's results are kept in history, not in the event log.

What is stored is unchanged; storages that are not SQLite files (Postgres) are left alone.
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


def _in_wal_mode(connection: sqlite3.Connection) -> bool:
    return str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"


@contextmanager
def sqlite_files_kept_open() -> Iterator[None]:
    """Within the block, every SQLite file a storage writes stays open (one idle connection each)
    until the block ends, and a connection to a WAL file commits without waiting for the disk."""
    keepers: dict[str, sqlite3.Connection] = {}
    lock = threading.Lock()

    def unsynced(dbapi_connection: Any, _record: Any) -> None:
        # A file that is not in WAL mode yet (being created) keeps the default: NORMAL is only
        # crash-safe with a write-ahead log.
        if isinstance(dbapi_connection, sqlite3.Connection) and _in_wal_mode(dbapi_connection):
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    def keep(dbapi_connection: Any, _record: Any) -> None:
        # On check-in the storage's work is committed. A keeper opened while the file is in WAL
        # mode joins the WAL (its first read maps the shared memory); one opened while a new file
        # is still being created (rollback journal) would hold nothing once the file switches.
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        path = _database_file(dbapi_connection)
        with lock:
            if not path or path in keepers or not _in_wal_mode(dbapi_connection):
                return
            keeper = sqlite3.connect(path, check_same_thread=False)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()
            keepers[path] = keeper

    event.listen(Pool, "connect", unsynced)
    event.listen(Pool, "checkin", keep)
    try:
        yield
    finally:
        event.remove(Pool, "checkin", keep)
        event.remove(Pool, "connect", unsynced)
        with lock:
            for keeper in keepers.values():
                keeper.close()
            keepers.clear()
