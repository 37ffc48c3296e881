"""The instance's SQLite files stay open while a lane runs (one checkpoint per file, same rows),
a WAL file's commits are not synced one by one, and a run's event file is made before it starts."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import dagster as dg
import sqlalchemy as sa

from eval_pipeline.dagster_wiring.sqlite_files import prepare_run_file, sqlite_files_kept_open


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


def _schema(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    with closing(sqlite3.connect(path)) as connection:
        tables = sorted(connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
        revisions = [r for (r,) in connection.execute("SELECT version_num FROM alembic_version")]
    return tables, revisions


@dg.asset
def _one() -> int:
    return 1


def test_a_run_file_made_before_the_run_is_the_one_dagster_writes_its_events_into(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.get_runs(limit=1)  # the storages exist, the index among them
        run_id = str(uuid.uuid4())
        assert prepare_run_file(instance.root_directory, run_id)
        run_file = tmp_path / "history" / "runs" / f"{run_id}.db"
        made = run_file.stat().st_ino
        index = _schema(tmp_path / "history" / "runs" / "index.db")
        assert _schema(run_file) == index and index[1]  # the index's tables, at its revision
        assert not prepare_run_file(instance.root_directory, run_id)  # never over an existing file
        job = dg.Definitions(assets=[_one]).resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(instance=instance, run_id=run_id)
        assert result.success and result.run_id == run_id
        assert run_file.stat().st_ino == made  # used as it was, not made again
        assert _schema(run_file) == index
        with closing(sqlite3.connect(run_file)) as connection:
            stored = connection.execute("SELECT count(*) FROM event_logs WHERE run_id = ?", (run_id,))
            assert stored.fetchone()[0] == len(instance.all_logs(run_id)) > 0
        assert not list((tmp_path / "history" / "runs").glob(".*"))  # no scratch file left


def test_an_instance_without_run_files_gets_none() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        assert not prepare_run_file(instance.root_directory, str(uuid.uuid4()))


def test_inside_the_block_a_storage_opens_each_file_once_not_once_per_event(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.get_runs(limit=1)
        opened: list[str] = []

        def count(dbapi_connection: sqlite3.Connection, _record: object) -> None:
            opened.extend(
                path for _, name, path in dbapi_connection.execute("PRAGMA database_list") if name == "main"
            )

        job = dg.Definitions(assets=[_one]).resolve_implicit_global_asset_job_def()
        sa.event.listen(sa.pool.Pool, "connect", count)
        try:
            with sqlite_files_kept_open():
                result = job.execute_in_process(instance=instance)
        finally:
            sa.event.remove(sa.pool.Pool, "connect", count)
        assert result.success
        events = len(instance.all_logs(result.run_id))
        assert events > 5 and opened  # the run stored its events through these connections
        # the storages' own connections: one per file (a keeper may add one more), not one per use
        assert max(opened.count(path) for path in set(opened)) <= 2, sorted(opened)
        with sqlite_files_kept_open():
            assert instance.get_run_by_id(result.run_id) is not None  # a fresh block works as well
