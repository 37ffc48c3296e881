"""The instance's SQLite files stay open while a lane runs (one checkpoint per file, same rows),
and a WAL file's commits are not synced one by one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from eval_pipeline.dagster_wiring.sqlite_files import sqlite_files_kept_open


def _wal_engine(path: Path) -> sa.Engine:
    """An engine like Dagster's SQLite storages: a new connection per use, the file in WAL mode."""
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("PRAGMA journal_mode=WAL"))
        connection.execute(sa.text("CREATE TABLE events (n INTEGER)"))
    return engine


def _write(engine: sa.Engine, n: int) -> None:
    with engine.begin() as connection:
        connection.execute(sa.text("INSERT INTO events VALUES (:n)"), {"n": n})


def test_writes_inside_the_block_leave_the_wal_until_the_block_ends(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    wal = tmp_path / "events.db-wal"
    engine = _wal_engine(path)
    _write(engine, 0)
    assert not wal.exists()  # the last connection closed: checkpointed, WAL deleted
    with sqlite_files_kept_open():
        for n in range(1, 4):
            _write(engine, n)
            assert wal.exists()  # a keeper holds the file: closing this connection was not the last
    assert not wal.exists()  # the keeper's close checkpointed once
    _write(engine, 4)  # and outside the block nothing is kept any more
    assert not wal.exists()
    with sqlite3.connect(path) as reader:
        assert [n for (n,) in reader.execute("SELECT n FROM events ORDER BY n")] == [0, 1, 2, 3, 4]


def _synchronous(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(sa.text("PRAGMA synchronous")).scalar_one())


FULL, NORMAL = 2, 1  # SQLite's numbers for the settings


def test_a_wal_file_commits_unsynced_inside_the_block_only(tmp_path: Path) -> None:
    engine = _wal_engine(tmp_path / "events.db")
    assert _synchronous(engine) == FULL
    with sqlite_files_kept_open():
        assert _synchronous(engine) == NORMAL
        _write(engine, 1)
    assert _synchronous(engine) == FULL


def test_a_file_without_a_write_ahead_log_keeps_its_synced_commits(tmp_path: Path) -> None:
    # NORMAL is crash-safe only with a WAL: a rollback-journal file is left at FULL.
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'plain.db'}", poolclass=sa.pool.NullPool)
    with sqlite_files_kept_open():
        assert _synchronous(engine) == FULL


def test_a_file_created_inside_the_block_is_kept_once_it_has_a_write_ahead_log(tmp_path: Path) -> None:
    # Like a run's own event file: created inside the block, first used without a WAL (its
    # schema), then switched to WAL mode. A keeper opened before the switch holds nothing.
    path = tmp_path / "run.db"
    wal = tmp_path / "run.db-wal"
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with sqlite_files_kept_open():
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE events (n INTEGER)"))
        with engine.begin() as connection:
            connection.execute(sa.text("PRAGMA journal_mode=WAL"))
        for n in range(3):
            _write(engine, n)
            assert wal.exists()  # kept open: this close was not the last, so no checkpoint
        assert _synchronous(engine) == NORMAL
    assert not wal.exists()
    with sqlite3.connect(path) as reader:
        assert [n for (n,) in reader.execute("SELECT n FROM events ORDER BY n")] == [0, 1, 2]
