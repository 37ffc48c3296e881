"""``history --sql`` reads the history and nothing else: no file outside the root, no writes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.history.sql import READ_ONLY_ROOT, read_only_connection

runner = CliRunner()


def sql(history: str, query: str) -> tuple[int, str]:
    result = runner.invoke(app, ["history", "--history", history, "--sql", query, "-f", "csv"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(result.output.split())


def test_queries_over_the_views_still_answer(history: str) -> None:
    code, output = sql(history, "SELECT count(DISTINCT run_id) AS runs FROM metrics")
    assert code == 0, output
    header, count = output.split()
    assert header == "runs" and int(count) > 0


def test_no_file_outside_the_history_root_can_be_read(history: str) -> None:
    assert Path("/etc/hostname").exists()
    for query in (
        "SELECT * FROM read_text('/etc/hostname')",
        f"SELECT * FROM read_text('{history}/../../../../etc/hostname')",
        "SELECT * FROM read_csv('/etc/hostname')",
    ):
        code, output = sql(history, query)
        assert code == EXIT_BAD_INPUT, query
        assert "file system operations are disabled" in output


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT 42) TO '{target}'",
        "COPY (SELECT 42) TO '{root}/inside.csv'",
        "EXPORT DATABASE '{root}/export'",
        "ATTACH '{target}' AS other",
        "SELECT 1; COPY (SELECT 42) TO '{target}'",
        "SET enable_external_access = true",
    ],
)
def test_nothing_can_be_written_or_attached(history: str, tmp_path: Path, statement: str) -> None:
    target = tmp_path / "written.csv"
    before = sorted(p.name for p in Path(history).rglob("*"))
    code, output = sql(history, statement.format(target=target, root=history))
    assert code == EXIT_BAD_INPUT, output
    assert not target.exists()
    assert sorted(p.name for p in Path(history).rglob("*")) == before


def file_digests(root: Path) -> dict[str, str]:
    """Every file below ``root`` with the SHA-256 of its bytes."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def a_stored_file(root: Path, table: str) -> str:
    """One stored Parquet file of ``table``, as the read-only connection names it."""
    stored = next((root / table).rglob("*.parquet"))
    return f"{READ_ONLY_ROOT}/{stored.relative_to(root).as_posix()}"


# Every DuckDB statement family that writes, or reaches files, aimed at the history root (by
# the connection's own name for it and by its real path), at an existing file (to overwrite
# it) and outside the root. ``{ro}`` is the root as the connection names it, ``{root}`` its
# real path, ``{manifest}``/``{metrics}`` an existing file, ``{outside}`` a path elsewhere.
WRITE_VECTORS = [
    "COPY (SELECT 42 AS x) TO '{ro}/run_manifests/forged.parquet' (FORMAT parquet)",
    "COPY (SELECT 42 AS x) TO '{manifest}' (FORMAT parquet)",
    "COPY (SELECT * FROM metrics) TO '{metrics}' (FORMAT parquet)",
    "COPY (SELECT 42 AS x) TO '{root}/run_manifests/forged.parquet' (FORMAT parquet)",
    "COPY (SELECT 42 AS x, 1 AS p) TO '{ro}/metrics' (FORMAT parquet, PARTITION_BY (p))",
    "COPY (SELECT 42 AS x) TO '{outside}'",
    "EXPLAIN ANALYZE COPY (SELECT 42 AS x) TO '{ro}/run_manifests/forged.parquet' (FORMAT parquet)",
    "EXPLAIN ANALYZE COPY (SELECT 42 AS x) TO '{manifest}' (FORMAT parquet)",
    "EXPLAIN ANALYZE COPY (SELECT 42 AS x) TO '{root}/run_manifests/forged.parquet' (FORMAT parquet)",
    "EXPLAIN COPY (SELECT 42 AS x) TO '{manifest}' (FORMAT parquet)",
    "EXPORT DATABASE '{ro}/export'",
    "EXPORT DATABASE '{root}/export'",
    "ATTACH '{ro}/forged.duckdb' AS forged",
    "ATTACH '{root}/forged.duckdb' AS forged",
    "ATTACH '{outside}' AS forged",
    "ATTACH ':memory:' AS scratch",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET allowed_directories = ['/']",
    "SET GLOBAL allowed_directories = ['/']",
    "RESET allowed_directories",
    "SET lock_configuration = false",
    "PRAGMA enable_external_access",
    "SET temp_directory = '{root}'",
    "CREATE TABLE forged AS SELECT 42 AS x",
    "CREATE OR REPLACE VIEW metrics AS SELECT 1 AS value",
    "CREATE SECRET forged (TYPE s3, KEY_ID 'k', SECRET 's')",
    "INSERT INTO run_manifests SELECT * FROM run_manifests",
    "UPDATE run_manifests SET lane = 'forged'",
    "DELETE FROM run_manifests",
    "DROP VIEW metrics",
    "CHECKPOINT",
    "VACUUM",
    "SELECT * FROM read_text('{outside_existing}')",
    "SELECT * FROM read_blob('{outside_existing}')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_csv('{outside_existing}')",
    "SELECT * FROM read_parquet('{root}/metrics/**/*.parquet')",
    "SELECT * FROM read_text('{ro}/../../../../etc/hostname')",
    "SELECT * FROM duckdb_settings() WHERE name = 'x'; COPY (SELECT 1) TO '{manifest}'",
]


def vector(statement: str, root: Path, tmp_path: Path) -> str:
    return statement.format(
        ro=READ_ONLY_ROOT,
        root=root,
        manifest=a_stored_file(root, "run_manifests"),
        metrics=a_stored_file(root, "metrics"),
        outside=tmp_path / "written.out",
        outside_existing="/etc/hostname",
    )


@contextmanager
def untouched(history: str, tmp_path: Path, statement: str) -> Iterator[str]:
    """The statement aimed at this history (the body runs it); afterwards every history file
    holds the bytes it held before, and nothing was written outside."""
    root = Path(history)
    before = file_digests(root)
    query = vector(statement, root, tmp_path)
    yield query
    assert file_digests(root) == before, query
    assert not (tmp_path / "written.out").exists(), query


@pytest.mark.parametrize("statement", WRITE_VECTORS)
def test_the_connection_itself_cannot_write_into_history_whatever_the_statement(
    history: str, tmp_path: Path, statement: str
) -> None:
    """No statement filter in the way: the locked connection alone keeps every file as it was."""
    with untouched(history, tmp_path, statement) as query, read_only_connection(history) as con:
        try:
            for part in con.extract_statements(query):
                con.execute(part.query)
        except duckdb.Error:
            pass  # refused: what matters is that nothing below changed


@pytest.mark.parametrize("statement", WRITE_VECTORS)
def test_history_sql_refuses_every_write_vector_and_leaves_history_byte_identical(
    history: str, tmp_path: Path, statement: str
) -> None:
    with untouched(history, tmp_path, statement) as query:
        code, output = sql(history, query)
    only_plans = statement.startswith("EXPLAIN COPY")  # a plan, not run: it reads, writes nothing
    assert code == (0 if only_plans else EXIT_BAD_INPUT), (query, output)


def test_help_says_the_connection_is_read_only() -> None:
    result = runner.invoke(app, ["history", "--help"], env={"COLUMNS": "250"})
    assert "cannot write files, ATTACH databases" in " ".join(result.output.replace("│", " ").split())


def test_duckdbs_temporary_directory_is_neither_written_nor_read(
    history: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB allows its temporary directory (``.tmp`` below the working directory) whatever
    ``allowed_directories`` says: the connection has none."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("not history\n", encoding="utf-8")
    before = file_digests(tmp_path / ".tmp")
    for query in (
        "EXPLAIN ANALYZE COPY (SELECT 'x') TO '.tmp/x.csv'",
        f"EXPLAIN ANALYZE COPY (SELECT 'x') TO '{tmp_path}/.tmp/x.csv'",
        "SELECT * FROM read_text('.tmp/secret.txt')",
        f"SELECT * FROM read_text('{tmp_path}/.tmp/secret.txt')",
        "SELECT * FROM glob('.tmp/*')",
    ):
        code, output = sql(history, query)
        assert code == EXIT_BAD_INPUT and "not history" not in output, (query, output)
    assert file_digests(tmp_path / ".tmp") == before


def test_a_symbolic_link_inside_history_does_not_lead_out_of_it(history: str, tmp_path: Path) -> None:
    assert Path("/etc/passwd").is_file()
    (Path(history) / "etc_link").symlink_to("/etc")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not history\n", encoding="utf-8")
    (Path(history) / "run_manifests" / "outside_link").symlink_to(outside)
    for query in (
        f"SELECT * FROM read_text('{READ_ONLY_ROOT}/etc_link/passwd')",
        f"SELECT * FROM read_text('{READ_ONLY_ROOT}/run_manifests/outside_link/secret.txt')",
        f"SELECT * FROM read_text('{READ_ONLY_ROOT}/*/*')",
        f"SELECT * FROM glob('{READ_ONLY_ROOT}/etc_link/*')",
    ):
        code, output = sql(history, query)
        assert "root:" not in output and "not history" not in output, (query, output)
        assert code == EXIT_BAD_INPUT or "passwd" not in output, (query, output)
    # The views (globs over the root) still answer, a link among their files left out.
    (Path(history) / "metrics" / "passwd_link.parquet").symlink_to("/etc/passwd")
    code, output = sql(history, "SELECT count(DISTINCT run_id) AS runs FROM metrics")
    assert code == 0 and int(output.split()[1]) > 0, output


def test_a_history_root_that_is_itself_a_link_is_read(history: str, tmp_path: Path) -> None:
    linked = tmp_path / "linked_history"
    linked.symlink_to(history)
    code, output = sql(str(linked), "SELECT count(DISTINCT run_id) AS runs FROM metrics")
    assert code == 0 and int(output.split()[1]) > 0, output


def test_a_hard_link_inside_history_is_not_read(history: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("not history\n", encoding="utf-8")
    os.link(secret, Path(history) / "secret_link.txt")
    assert (Path(history) / "secret_link.txt").stat().st_nlink == 2
    for query in (
        f"SELECT * FROM read_text('{READ_ONLY_ROOT}/secret_link.txt')",
        f"SELECT * FROM read_csv('{READ_ONLY_ROOT}/secret_link.txt')",
        f"SELECT * FROM read_text('{READ_ONLY_ROOT}/*.txt')",
    ):
        code, output = sql(history, query)
        assert "not history" not in output, (query, output)
        assert code == EXIT_BAD_INPUT or "secret_link" not in output, (query, output)
    code, output = sql(history, f"SELECT * FROM read_text('{READ_ONLY_ROOT}/secret_link.txt')")
    assert code == EXIT_BAD_INPUT and "a file with several names (a hard link" in output, output
    # A hard link among the views' files is left out of them; the views still answer.
    store_file = next((Path(history) / "metrics").rglob("*.parquet"))
    os.link(secret, store_file.with_name("linked.parquet"))
    code, output = sql(history, "SELECT count(DISTINCT run_id) AS runs FROM metrics")
    assert code == 0 and int(output.split()[1]) > 0, output


def test_a_pipe_inside_history_is_not_waited_on(history: str) -> None:
    os.mkfifo(Path(history) / "pipe.txt")  # a read of it would wait for a writer forever
    command = [str(Path(sys.executable).parent / "eval-pipeline"), "history", "--history", history, "--sql"]
    for query, code, says in (
        (
            f"SELECT * FROM read_text('{READ_ONLY_ROOT}/pipe.txt')",
            EXIT_BAD_INPUT,
            "not a file the history store wrote",
        ),
        (f"SELECT count(*) AS n FROM read_text('{READ_ONLY_ROOT}/*.txt')", 0, "0"),
    ):
        done = subprocess.run([*command, query], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == code and says in done.stdout + done.stderr, (
            query,
            done.stdout,
            done.stderr,
        )
