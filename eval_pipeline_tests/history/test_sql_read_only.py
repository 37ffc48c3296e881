"""``history --sql`` reads the history and nothing else: no file outside the root, no writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT

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


def test_help_says_the_connection_is_read_only() -> None:
    result = runner.invoke(app, ["history", "--help"], env={"COLUMNS": "250"})
    assert "cannot write files, ATTACH databases" in " ".join(result.output.replace("│", " ").split())
