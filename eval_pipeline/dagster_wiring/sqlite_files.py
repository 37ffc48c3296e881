"""Make a local instance's SQLite writes cheap while a lane runs: files kept open, commits not synced.

Dagster's SQLite storages open a connection for every write and close it right after, and a
lane run stores a hundred or so events (step, input, output, materialization and check events;
asset events twice, in the run's file and in the index), each its own transaction. Three costs
follow, and all are removed here for the connections opened within the block:

- **Checkpoints.** In WAL mode the last connection to close a database checkpoints it and
  deletes its WAL and shared-memory files. While one idle connection per file stays open,
  those closes are not the last, and the checkpoint happens once, when the keeper closes.
- **A sync per commit.** With SQLite's default ``synchronous=FULL`` every commit waits for the
  disk. In WAL mode ``synchronous=NORMAL`` syncs at checkpoints only and the database stays
  consistent after any crash; what a power loss (not a killed process) can cost is the run's
  last events, and the run's results are kept in history, not in the event log.
- **An engine per use.** Each use builds a SQLAlchemy engine (its dialect set up anew) and
  opens a connection (``storage_engines_shared``): within the block a storage gets one engine
  per database, whose connection is pooled, so a hundred events cost one open each.

What is stored is unchanged; storages that are not SQLite files (Postgres) are left alone.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.pool import NullPool, Pool


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
    until the block ends, a connection to a WAL file commits without waiting for the disk, and
    Dagster's storages reuse one engine per file (``storage_engines_shared``)."""
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
        with storage_engines_shared():
            yield
    finally:
        event.remove(Pool, "checkin", keep)
        event.remove(Pool, "connect", unsynced)
        with lock:
            for keeper in keepers.values():
                keeper.close()
            keepers.clear()


# No public API: the modules of Dagster's SQLite storages, each of which calls the
# `create_engine` it imported, with NullPool, for every connection it opens.
STORAGE_MODULES = (
    "dagster._core.storage.event_log.sqlite.sqlite_event_log",
    "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "dagster._core.storage.schedules.sqlite.sqlite_schedule_storage",
)


@contextmanager
def storage_engines_shared() -> Iterator[None]:
    """Within the block, a SQLite storage that asks for a new unpooled engine gets one engine per
    database and connection settings, made once, whose connections are pooled (its ``dispose``
    after each use does nothing); every engine is disposed of when the block ends. The
    transactions are the storage's own, as before; only their connections are reused."""
    modules = [importlib.import_module(name) for name in STORAGE_MODULES]
    original = modules[0].create_engine
    engines: dict[tuple[str, str], Engine] = {}
    lock = threading.Lock()

    def shared(url: Any, *args: Any, **kwargs: Any) -> Engine:
        connect_args = kwargs.get("connect_args", {})
        if args or kwargs.get("poolclass") is not NullPool or set(kwargs) - {"poolclass", "connect_args"}:
            return original(url, *args, **kwargs)
        key = (str(url), repr(sorted(connect_args.items())))
        with lock:
            if key not in engines:
                engine: Engine = original(url, connect_args=connect_args)
                engine.dispose = lambda *_, **__: None  # type: ignore[method-assign]
                engines[key] = engine
            return engines[key]

    for module in modules:
        module.create_engine = shared  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in modules:
            module.create_engine = original  # type: ignore[attr-defined]
        with lock:
            for engine in engines.values():
                Engine.dispose(engine)
            engines.clear()


# Where Dagster's default SQLite storage keeps a run's events: one file per run next to the
# cross-run index, all of one schema (DAGSTER_HOME/history/runs/{index,<run id>}.db).
RUN_FILES = Path("history") / "runs"
INDEX_FILE = "index.db"


def _schema_script(index: sqlite3.Connection) -> str:
    """The statements that make a file of the index's schema, at its migration revision."""
    statements = [
        f"{sql};"
        for (sql,) in index.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
    ]
    revisions = [revision for (revision,) in index.execute("SELECT version_num FROM alembic_version")]
    statements += [f"INSERT INTO alembic_version VALUES ({_quoted(revision)});" for revision in revisions]
    return "\n".join(statements)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def prepare_run_file(instance_root: str | Path, run_id: str) -> bool:
    """Create the event file of run ``run_id`` before the run starts, when the instance keeps
    runs in SQLite files (False, and nothing done, when it does not: Postgres, in memory).

    Dagster creates a run's file at its first event through its migration tool: a dozen
    schema transactions, each synced to the disk while the file has no write-ahead log yet.
    Here the file is made in one unsynced transaction from the index's own schema and
    migration revision (the two files share one schema), in WAL mode, and moved into place
    whole, so Dagster finds a file at its current revision and uses it as is."""
    folder = Path(instance_root) / RUN_FILES
    index_path, target = folder / INDEX_FILE, folder / f"{run_id}.db"
    if not index_path.is_file() or target.exists():
        return False
    with closing(sqlite3.connect(index_path)) as index:
        try:
            script = _schema_script(index)
        except sqlite3.DatabaseError:  # not the layout this expects: let Dagster create the file
            return False
    scratch = folder / f".{run_id}.db.new"
    try:
        with closing(sqlite3.connect(scratch)) as created:
            created.execute("PRAGMA synchronous=OFF")
            created.execute("PRAGMA journal_mode=WAL")
            created.executescript(f"BEGIN;\n{script}\nCOMMIT;")
        os.replace(scratch, target)
    finally:
        scratch.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    return True
