"""One run outcome, every surface: a lane judged per turn shows its failing cases (with the turn
and the reason) in the run's table, `show`, `show --case`, JUnit, the CI summary, the viewer and
the Dagster check metadata; `no_regression` reads n/a where it compared nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import junitparser
import pytest

from eval_pipeline.cli.common import EXIT_CHECK_FAILED, EXIT_VOID
from eval_pipeline.history.runs import find_runs
from eval_pipeline.history.views import connect
from eval_pipeline.outcome.run_outcome import committed_outcome
from eval_pipeline_tests.cli.test_what_failed import _closed_port, cli
from eval_pipeline_tests.history.viewer_server import get, serving

pytestmark = pytest.mark.slow

WARM = "warmed_session_consistency"
# A case the warm-drift runtime answers with a placeholder, and the line naming its failing turn.
DRIFTED = "warm_define_justice_004"
DRIFTED_LINE = f"{DRIFTED} · turn 1 · no_warm_placeholder · hard · placeholder_present"


def _run_id(stdout: str) -> str:
    """The 8-character run id a run's table caption prints."""
    found = re.search(r"^run ([0-9a-f]{8})", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(1)


def test_a_lane_judged_per_turn_shows_its_failing_turns_on_every_surface(
    tmp_path: Path, history_root: Path
) -> None:
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    result = cli(
        "run", "--lane", WARM, "--runtime", "reference-warm-drift",
        "--junit", str(junit), "--summary-md", str(summary),
    )  # fmt: skip
    assert result.returncode == EXIT_CHECK_FAILED, result.stdout + result.stderr
    out = result.stdout
    assert "3 blocking check failure(s)" in out
    listed = re.search(r"failing cases \((\d+) case\(s\), (\d+) result\(s\)\):", out)
    assert listed is not None, out
    failing_cases = int(listed.group(1))
    assert failing_cases >= 5
    assert DRIFTED_LINE in out
    assert "placeholder “<prior>”" in out
    assert "no_regression: n/a (first run of this series)" in out
    run = _run_id(out)

    shown = cli("show", run)
    assert shown.returncode == 0, shown.stderr
    assert DRIFTED_LINE in shown.stdout and "no failing case" not in shown.stdout
    assert "verdict fail" in shown.stdout

    case = cli("show", run, "--case", DRIFTED)
    assert case.returncode == 0, case.stderr
    assert re.search(r"turn 1 \(turn\)\n  prompt: .*\n  surface: <prior> ", case.stdout), case.stdout
    assert "fail no_warm_placeholder [placeholder_present]" in case.stdout
    assert "none: this lane judges the case per turn" in case.stdout

    # JUnit: a failure per failing case, naming the turn.
    suites = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert sum(int(s.failures) for s in suites) == failing_cases
    assert int(suites[0].tests) == 8  # every case of the split, though none has a case row
    failed = {tc.name: tc.result[0] for tc in suites[0] if tc.result}
    assert str(failed[DRIFTED].message).startswith("grounding_stable: turn 0: The same prompt got")
    assert "no_warm_placeholder [placeholder_present]: turn 1: The answer contains" in str(
        failed[DRIFTED].text
    )

    text = summary.read_text("utf-8")
    assert "## eval-pipeline: fail" in text
    assert f"| {DRIFTED.replace('_', chr(92) + '_')} | turn 1 | no\\_warm\\_placeholder |" in text

    # The failed check's metadata in the instance lists the failing turns.
    with connect(str(history_root)) as con:
        (ref,) = find_runs(con, run)
    full_id = ref.run_id
    instance = dg.DagsterInstance.get()
    evaluations = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
        for e in instance.all_logs(full_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.dagster_event is not None
    }
    assert "no_placeholder_rate" in evaluations, (full_id, sorted(evaluations))
    placeholder = evaluations["no_placeholder_rate"]
    assert not placeholder.passed
    table = str(placeholder.metadata["failing_case_table"].value)
    assert f"| {DRIFTED.replace('_', chr(92) + '_')} | turn 1 | no\\_warm\\_placeholder |" in table
    assert evaluations["no_regression"].metadata["verdict"].value == "n/a"

    # The viewer: the run page lists them, the case page shows each turn's verdicts, the grid
    # counts the cases failing.
    with serving(str(history_root)) as url:
        status, page = get(f"{url}/runs/{full_id}")
        assert status == 200
        assert "No failing case." not in page and DRIFTED in page
        assert f"Failing cases ({failing_cases} case(s)" in page
        assert re.search(r"<td>no_regression</td><td class=\"[^\"]*\">n/a</td>", page), page
        status, case_page = get(f"{url}/runs/{full_id}/cases/{DRIFTED}")
        assert status == 200 and "placeholder_present" in case_page
        status, grid = get(f"{url}/lanes/{WARM}/grid?filter=failing")
        assert status == 200
        assert f"{failing_cases} case(s) failing anywhere" in grid


def test_a_declared_lane_judged_per_turn_without_case_rows_names_its_failing_turns(
    tmp_path: Path, history_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane whose probe is judged per turn with no ``case_rows``: its failing case is listed
    and `show --case` finds it."""
    evals = tmp_path / "evals"
    lane = evals / "per_turn_inventory"
    (lane / "dev").mkdir(parents=True)
    (lane / "contract.md").write_text("# per_turn_inventory\n\nNo dotted inventory, turn by turn.\n")
    (lane / "lane.yaml").write_text(
        """name: per_turn_inventory
version: v1
title: Per-turn inventory
contract: contract.md
splits: {dev: [dev/cases.jsonl]}
nightly_splits: [dev]
thresholds:
  - {metric: inventory_free_rate, op: "==", value: 1.0, severity: ERROR, reason: "Contract."}
case_schema:
  fields:
    prompt: {type: str, min_length: 1}
threads:
  turns:
    - {role: probe, from: prompt}
turn_predicates:
  - role: probe
    predicates: [no_dotted_inventory]
metrics:
  inventory_free_rate: {rate: no_dotted_inventory, over: turns}
  cases: {count: cases}
""",
        encoding="utf-8",
    )
    cases = [
        {"id": "belief_probe", "prompt": "What is belief?"},
        {"id": "truth_probe", "prompt": "What is truth?"},
    ]
    (lane / "dev" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    (evals / "runtimes.yaml").write_text(
        "targets:\n  bare:\n    spec: reference:no-gloss\n    description: pre-gloss surfaces\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    junit = tmp_path / "junit.xml"
    result = cli("run", "--lane", "per_turn_inventory", "--runtime", "bare", "--junit", str(junit))
    assert result.returncode == EXIT_CHECK_FAILED, result.stdout + result.stderr
    assert "belief_probe · turn 0 · no_dotted_inventory · hard · dotted_inventory" in result.stdout
    run = _run_id(result.stdout)
    shown = cli("show", run)
    assert "belief_probe · turn 0 · no_dotted_inventory · hard · dotted_inventory" in shown.stdout
    case = cli("show", run, "--case", "belief_probe")
    assert case.returncode == 0, case.stderr
    assert "fail no_dotted_inventory [dotted_inventory]" in case.stdout
    (suite,) = junitparser.JUnitXml.fromfile(str(junit))
    failed = {tc.name: tc.result[0] for tc in suite if tc.result}
    assert "belief_probe" in failed and "turn 0: " in str(failed["belief_probe"].message)

    with connect(str(history_root)) as con:
        (ref,) = find_runs(con, run)
    evaluations = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
        for e in dg.DagsterInstance.get().all_logs(
            ref.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        if e.dagster_event is not None
    }
    assert "belief\\_probe | turn 0 |" in str(
        evaluations["inventory_free_rate"].metadata["failing_case_table"].value
    )
    with serving(str(history_root)) as url:
        status, page = get(f"{url}/runs/{ref.run_id}")
    assert status == 200 and "No failing case." not in page and "belief_probe" in page


def test_no_regression_reads_n_a_on_a_void_run(history_root: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = cli(
        "run", "--lane", "deterministic_fluency", "--split", "dev", "--json",
        "--runtime", f"openai:{url}", "-o", "model=x", "-o", "max_retries=0",
    )  # fmt: skip
    assert result.returncode == EXIT_VOID, result.stdout + result.stderr
    (lane,) = json.loads(result.stdout)["lanes"]
    assert lane["verdict"] == "void"
    regression = next(c for c in lane["checks"] if c["name"] == "no_regression")
    assert regression["verdict"] == "n/a" and regression["reason"] == "void run"
    with connect(str(history_root)) as con:
        (ref,) = find_runs(con, lane["run_id"])
        stored = committed_outcome(con, ref)
    assert stored is not None and stored.void and stored.verdict == "void"
    assert stored.check("no_regression") is not None
    assert stored.check("no_regression").verdict == "n/a"  # type: ignore[union-attr]
