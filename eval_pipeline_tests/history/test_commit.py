"""A run is visible only once committed: a kill at any point of the append leaves nothing
visible and nothing a query trips on; compaction never publishes an uncommitted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.series import Series
from eval_pipeline.history.compact import compact
from eval_pipeline.history.regression import find_regressions
from eval_pipeline.history.store import DATA_TABLES, append_run, commit_run
from eval_pipeline.history.views import connect, refresh
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.run.pipeline import LaneRun

from .conftest import (
    CANDIDATE_RUNS,
    LANE,
    METRICS_PER_RUN,
    SPLIT,
    StoredRun,
    manifest,
    record_run,
    run_tables,
)

runner = CliRunner()
KILLED = StoredRun("run-killed", "candidate", "2024-04-02", True)  # would flip 27 verdicts vs run-c4
VIEWS = ("metrics", "case_predicates", "turn_verdicts", "transcripts", "run_manifests", "runs")


def visible_rows(root: str, run_id: str) -> dict[str, int]:
    with connect(root) as con:
        return {
            view: int(con.execute(f"SELECT count(*) FROM {view} WHERE run_id = ?", [run_id]).fetchone()[0])  # type: ignore[index]
            for view in VIEWS
        }


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def assert_invisible(root: str, run_id: str, tmp_path: Path) -> None:
    assert visible_rows(root, run_id) == dict.fromkeys(VIEWS, 0)
    # Every command answers as if the run did not exist.
    assert run_id not in cli("history", "-f", "json")
    assert [(d["run_a"], d["run_b"]) for d in json.loads(cli("diff", "-f", "json"))] == [
        ("run-c3", "run-c4"),
        ("run-r1", "run-r2"),
    ]
    assert run_id not in cli("flaky", "-f", "json", "--all")
    assert run_id not in cli("first-failure", "fluency_truth_001", "-f", "json")
    assert run_id not in cli(
        "compare", "--lane", LANE, "--runtime", "candidate", "--runtime", "reference", "--json"
    )
    cli("report", "--out", str(tmp_path / "report"))
    assert run_id not in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("tables_written", [1, 2, 3, 4])
def test_a_run_killed_after_any_table_is_invisible_until_committed(
    history: str, lane_runs: dict[bool, LaneRun], tmp_path: Path, tables_written: int
) -> None:
    tables = run_tables(lane_runs[KILLED.glossed], KILLED)
    for table, df in list(tables.items())[:tables_written]:
        append_run(history, table, df, lane=LANE, date=KILLED.date, run_id=KILLED.run_id)
    # An interrupted write's temporary file (a kill inside write_atomically) sits beside them.
    folder = Path(history) / "metrics" / f"lane={LANE}" / f"date={KILLED.date}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".run-killed.parquet.0123abcd.tmp").write_bytes(b"")
    assert_invisible(history, KILLED.run_id, tmp_path)
    # The regression check of a later run still compares with the last committed run.
    later = lane_runs[True]
    findings = find_regressions(
        history,
        series=Series(LANE, SPLIT, "candidate", SPLIT),
        metrics=later.metrics,
        case_predicates=later.case_predicates,
        metric_rows=lane_kind(find_lane(LANE)).metric_rows,
    )
    assert {f.previous_run_id for f in findings} == {"run-c4"}

    commit_run(history, manifest(KILLED), lane=LANE, date=KILLED.date, run_id=KILLED.run_id)
    rows = visible_rows(history, KILLED.run_id)
    assert rows["runs"] == 1 and rows["run_manifests"] == 1
    assert rows["metrics"] == METRICS_PER_RUN and rows["case_predicates"] == (
        115 if tables_written >= 2 else 0
    )
    assert rows["turn_verdicts"] == (90 if tables_written >= 3 else 0)
    assert rows["transcripts"] == (16 if tables_written == 4 else 0)
    diffs = json.loads(cli("diff", "-f", "json"))
    assert ("run-c4", "run-killed") in [(d["run_a"], d["run_b"]) for d in diffs]


def test_commit_refuses_a_partial_run_and_is_idempotent(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    tables = run_tables(lane_runs[True], KILLED)
    append_run(history, "metrics", tables["metrics"], lane=LANE, date=KILLED.date, run_id=KILLED.run_id)
    claims_all = manifest(KILLED).assign(tables=",".join(DATA_TABLES))
    with pytest.raises(
        ValueError, match=r"tables \['case_predicates', 'turn_verdicts', 'transcripts'\] are not stored"
    ):
        commit_run(history, claims_all, lane=LANE, date=KILLED.date, run_id=KILLED.run_id)
    with pytest.raises(ValueError, match="manifest column run_id holds"):
        commit_run(history, manifest(KILLED), lane=LANE, date=KILLED.date, run_id="another-run")
    with pytest.raises(ValueError, match="case_set must be set"):
        commit_run(
            history, manifest(KILLED).assign(case_set=None), lane=LANE, date=KILLED.date, run_id=KILLED.run_id
        )
    assert visible_rows(history, KILLED.run_id)["metrics"] == 0
    path = commit_run(history, manifest(KILLED), lane=LANE, date=KILLED.date, run_id=KILLED.run_id)
    assert path is not None and path.endswith(
        "run_manifests/lane=deterministic_fluency/date=2024-04-02/run-killed.parquet"
    )
    assert commit_run(history, manifest(KILLED), lane=LANE, date=KILLED.date, run_id=KILLED.run_id) is None
    with connect(history) as con:
        row = con.execute(
            "SELECT tables, committed_at IS NOT NULL FROM run_manifests WHERE run_id = ?", [KILLED.run_id]
        ).fetchone()
    assert row == ("metrics", True)


# A child that appends a run's tables one by one, waiting for a line on stdin before each:
# the test kills it (SIGKILL) at the fault point it chooses.
_CHILD = """
import sys
import pandas as pd
from eval_pipeline.history.store import append_run, commit_run
root, folder, lane, date, run_id = sys.argv[1:6]
for table in ("metrics", "case_predicates", "turn_verdicts", "transcripts"):
    sys.stdin.readline()
    append_run(root, table, pd.read_pickle(f"{folder}/{table}.pkl"), lane=lane, date=date, run_id=run_id)
    print(table, flush=True)
sys.stdin.readline()
commit_run(root, pd.read_pickle(f"{folder}/manifest.pkl"), lane=lane, date=date, run_id=run_id)
print("committed", flush=True)
"""


def test_sigkill_during_the_append_then_a_clean_rerun(
    history: str, lane_runs: dict[bool, LaneRun], tmp_path: Path
) -> None:
    def start(stored: StoredRun) -> subprocess.Popen[str]:
        folder = tmp_path / stored.run_id
        folder.mkdir()
        for table, df in run_tables(lane_runs[stored.glossed], stored).items():
            df.to_pickle(folder / f"{table}.pkl")
        manifest(stored).to_pickle(folder / "manifest.pkl")
        args = [sys.executable, "-c", _CHILD, history, str(folder), LANE, stored.date, stored.run_id]
        return subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ
        )

    child = start(KILLED)
    assert child.stdin and child.stdout
    for expected in ("metrics", "case_predicates"):  # fault point: after two of four tables
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == expected
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert visible_rows(history, KILLED.run_id) == dict.fromkeys(VIEWS, 0)

    rerun = StoredRun("run-rerun", KILLED.runtime, KILLED.date, KILLED.glossed)
    child = start(rerun)
    output, _ = child.communicate("go\n" * 5, timeout=60)
    assert child.returncode == 0 and output.split() == [*DATA_TABLES, "committed"]
    assert visible_rows(history, KILLED.run_id) == dict.fromkeys(VIEWS, 0)
    assert visible_rows(history, "run-rerun") == {
        "metrics": METRICS_PER_RUN,
        "case_predicates": 115,
        "turn_verdicts": 90,
        "transcripts": 16,
        "run_manifests": 1,
        "runs": 1,
    }


def test_compaction_drops_an_old_uncommitted_run_and_keeps_a_young_one(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    stray = StoredRun("run-stray", "candidate", "2024-03-05", True)
    record_run(history, lane_runs[True], stray, commit=False)
    with connect(history) as con:
        before = con.execute("SELECT * FROM case_predicates ORDER BY run_id, case_id, predicate").df()

    # Young: maybe still writing, so left in place, still invisible; committed later, it counts.
    done = compact(history, "2024-03")
    assert {(d.table, d.runs_added, d.uncommitted_dropped) for d in done} == {
        (t, 5, 0) for t in (*DATA_TABLES, "run_manifests")
    }
    assert visible_rows(history, "run-stray")["case_predicates"] == 0
    assert (Path(history) / "metrics" / f"lane={LANE}" / "date=2024-03-05" / "run-stray.parquet").exists()
    commit_run(history, manifest(stray), lane=LANE, date=stray.date, run_id=stray.run_id)
    assert visible_rows(history, "run-stray")["case_predicates"] == 115
    assert {(d.table, d.runs_added, d.runs_total) for d in compact(history, "2024-03")} == {
        (t, 1, 6) for t in (*DATA_TABLES, "run_manifests")
    }

    # Old and never committed: deleted, never copied into the compacted file.
    killed = StoredRun("run-old-kill", "candidate", "2024-03-06", False)
    record_run(history, lane_runs[False], killed, commit=False)
    temp = Path(history) / "metrics" / f"lane={LANE}" / "date=2024-03-06" / ".run-old-kill.parquet.ab12.tmp"
    temp.write_bytes(b"")
    done = compact(history, "2024-03", uncommitted_grace=timedelta(0))
    assert {(d.table, d.runs_added, d.uncommitted_dropped) for d in done} == {(t, 0, 1) for t in DATA_TABLES}
    assert not list(Path(history).rglob("*run-old-kill*")) and not temp.exists()
    assert not list(Path(history).glob(f"*/lane={LANE}/date=2024-03-0?"))
    with connect(history) as con:
        after = con.execute("SELECT * FROM case_predicates ORDER BY run_id, case_id, predicate").df()
    assert set(after["run_id"]) == {*before["run_id"], "run-stray"}
    pd.testing.assert_frame_equal(after[after.run_id != "run-stray"].reset_index(drop=True), before)


def test_a_refreshed_connection_sees_runs_committed_since_it_connected(
    history_root: Path, lane_runs: dict[bool, LaneRun]
) -> None:
    # The history step's one connection: opened on an empty history (a series' first run)
    # for the regression, refreshed after the commit for the trend.
    root = str(history_root)
    first, second = CANDIDATE_RUNS[0], CANDIDATE_RUNS[1]
    with connect(root) as con:
        record_run(root, lane_runs[first.glossed], first)
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)  # as when it connected
        refresh(con, root)
        for view in VIEWS:
            counted = con.execute(f"SELECT count(*) FROM {view} WHERE run_id = ?", [first.run_id]).fetchone()
            assert counted is not None and counted[0] > 0, view
        record_run(root, lane_runs[second.glossed], second, commit=False)
        refresh(con, root)
        assert con.execute("SELECT count(*) FROM metrics WHERE run_id = ?", [second.run_id]).fetchone() == (
            0,
        )
        assert con.execute("SELECT count(*) FROM metrics").fetchone() == (METRICS_PER_RUN,)


def test_a_refresh_of_named_tables_remakes_those_views_and_runs_only(
    history_root: Path, lane_runs: dict[bool, LaneRun]
) -> None:
    # The history step's trend after its commit reads metrics only.
    root = str(history_root)
    first = CANDIDATE_RUNS[0]
    with connect(root) as con:  # an empty history: every view made empty
        record_run(root, lane_runs[first.glossed], first)
        refresh(con, root, tables=("metrics",))
        assert con.execute("SELECT count(*) FROM metrics").fetchone() == (METRICS_PER_RUN,)
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM case_predicates").fetchone() == (0,)  # not remade
        refresh(con, root)
        counted = con.execute("SELECT count(*) FROM case_predicates").fetchone()
        assert counted is not None and counted[0] > 0


def test_a_connection_scoped_to_a_lane_sees_its_runs_only(
    history_root: Path, lane_runs: dict[bool, LaneRun]
) -> None:
    root = str(history_root)
    first = CANDIDATE_RUNS[0]
    record_run(root, lane_runs[first.glossed], first)
    with connect(root) as everything, connect(root, lane=LANE) as own, connect(root, lane="other") as other:
        for view in VIEWS:
            whole = everything.execute(f"SELECT count(*) FROM {view}").fetchone()
            assert whole is not None and whole[0] > 0, view
            assert own.execute(f"SELECT count(*) FROM {view}").fetchone() == whole, view
            assert other.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,), view
