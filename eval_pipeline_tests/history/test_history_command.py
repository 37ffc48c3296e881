"""The ``history`` command and the DuckDB views it queries."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.views import connect

from .conftest import CANDIDATE_RUNS, REFERENCE_RUNS

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_views_over_a_root_without_files_are_empty(tmp_path: Path) -> None:
    with connect(str(tmp_path / "nothing-here")) as con:
        for view in ("metrics", "case_predicates", "transcripts", "runs"):
            assert con.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,)
        assert "date" in [c[0] for c in con.execute("DESCRIBE metrics").fetchall()]
    code, output = invoke("history", "--format", "json")
    assert code == 0
    assert json.loads(output) == []


def test_runs_view_orders_each_series(history: str) -> None:
    with connect(history) as con:
        rows = con.execute("SELECT runtime, run_id, seq, warnings FROM runs ORDER BY runtime, seq").fetchall()
    assert rows == [
        ("candidate", "run-c1", 1, 0),
        ("candidate", "run-c2", 2, 2),
        ("candidate", "run-c3", 3, 0),
        ("candidate", "run-c4", 4, 2),
        ("reference", "run-r1", 1, 0),
        ("reference", "run-r2", 2, 0),
    ]


def test_history_json_filters_by_metric_and_since(history: str) -> None:
    code, output = invoke(
        "history", "--metric", "no_provenance_only_rate", "--since", "2024-03-02", "-f", "json"
    )
    assert code == 0, output
    rows = json.loads(output)
    assert [(r["run_id"], r["date"], round(r["value"], 4), r["passed"]) for r in rows] == [
        ("run-c2", "2024-03-02", 0.3333, False),
        ("run-r2", "2024-03-02", 0.9333, True),
        ("run-c3", "2024-03-03", 0.9333, True),
        ("run-c4", "2024-04-01", 0.3333, False),
    ]


def test_history_csv_and_table(history: str) -> None:
    code, output = invoke("history", "--lane", "deterministic_fluency", "--metric", "cases", "-f", "csv")
    assert code == 0, output
    rows = list(csv.DictReader(io.StringIO(output)))
    assert len(rows) == len(CANDIDATE_RUNS) + len(REFERENCE_RUNS)
    assert {r["value"] for r in rows} == {"15.0"}
    code, output = invoke("history", "--metric", "no_dotted_inventory_rate")
    assert code == 0
    assert "run-c4" in output and "0.3333" in output and "no_dotted_inventory_rate" in output


def test_history_sql_over_the_views(history: str) -> None:
    query = (
        "SELECT r.runtime, count(*) AS failing FROM case_predicates c JOIN runs r USING (run_id, lane, split, runtime) "
        "WHERE NOT c.passed AND c.predicate = 'no_provenance_only' GROUP BY 1 ORDER BY 1"
    )
    code, output = invoke("history", "--sql", query, "-f", "csv")
    assert code == 0, output
    # Glossed runs fail one case, no-gloss runs ten: candidate = 1 + 10 + 1 + 10, reference = 1 + 1.
    assert output.splitlines() == ["runtime,failing", "candidate,22", "reference,2"]


def test_history_bad_input_exits_2(history: str) -> None:
    code, output = invoke("history", "--since", "last week")
    assert code == 2 and "YYYY-MM-DD" in output
    code, output = invoke("history", "--sql", "SELECT * FROM no_such_view")
    assert code == 2 and "query failed" in output
