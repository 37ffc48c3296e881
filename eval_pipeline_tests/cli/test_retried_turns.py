"""Turns retried after a transient fault are counted in the run's usage (``retried_turns``), so
the summary, ``--json`` and the viewer say how many, not only ``errors 0``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history import connect
from eval_pipeline.metrics.usage import USAGE_METRICS, summed_usage, totals_text, usage_metrics
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.history.viewer_server import get, serving
from eval_pipeline_tests.runtimes.helpers import served_reference

LANE = "refusal_calibration"
RETRIED_TURNS = "retried_turns"  # the usage metric, by the name every surface shows
runner = CliRunner()


def test_retried_turns_are_a_usage_metric_the_totals_say() -> None:
    turns = pd.DataFrame(
        {
            "error": [None, None, "http_500", None, None],
            "latency_ms": [1.0, 2.0, 3.0, None, 5.0],
            "ttft_ms": [None] * 5,
            "prompt_tokens": [None] * 5,
            "completion_tokens": [None] * 5,
            "cost": [None] * 5,
            "cached": [False, False, False, True, False],
            "finish_reason": [None] * 5,
            "attempts": pd.array([1, 3, 4, None, 2], dtype="Int64"),  # a cached turn sent nothing
        }
    )
    usage = {m.metric: m.value for m in usage_metrics(turns)}
    assert usage[RETRIED_TURNS] == 3.0  # a retried turn that failed in the end was retried too
    assert RETRIED_TURNS in USAGE_METRICS
    assert "3 retried" in totals_text(usage)
    assert "retried" not in totals_text({**usage, RETRIED_TURNS: 0.0})
    assert summed_usage([usage, usage])[RETRIED_TURNS] == 6.0


def run_of(history_root: Path, run_id: str) -> tuple[int, float]:
    """Turns of the run sent more than once, as history's transcripts say; its retried_turns."""
    with connect(str(history_root)) as con:
        (sent_again,) = con.execute(
            "SELECT count(*) FILTER (WHERE attempts > 1) FROM transcripts WHERE run_id = ?", [run_id]
        ).fetchone() or (0,)
        (metric,) = con.execute(
            "SELECT value FROM metrics WHERE run_id = ? AND metric = ?", [run_id, RETRIED_TURNS]
        ).fetchone() or (None,)
    return int(sent_again), metric


@pytest.mark.slow
def test_the_summary_json_and_viewer_count_the_retried_turns(history_root: Path) -> None:
    with served_reference(ServeConfig(fault_rate=0.4, retry_after_s=0.0, seed=3)) as server:
        runtime = [
            "--runtime", f"openai:{server.base_url}", "-o", "model=reference",
            "-o", "max_retries=20", "-o", "backoff_s=0", "-o", "max_backoff_s=0",
        ]  # fmt: skip
        shown = runner.invoke(app, ["run", "--lane", LANE, *runtime])
        as_json = runner.invoke(app, ["run", "--lane", LANE, *runtime, "--json"])
    assert shown.exit_code == as_json.exit_code == 0, shown.output + as_json.output
    first = json.loads(runner.invoke(app, ["history", "-f", "json"]).stdout)[0]["run_id"]  # oldest first
    retried, metric = run_of(history_root, first)
    assert retried > 0 and metric == retried
    usage_lines = [line for line in shown.stdout.splitlines() if "usage:" in line]
    assert len(usage_lines) == 2 and all(f"{retried} retried" in line for line in usage_lines), shown.stdout
    (lane,) = json.loads(as_json.stdout)["lanes"]
    retried_again, metric_again = run_of(history_root, lane["run_id"])
    assert retried_again > 0 and lane["metrics"][RETRIED_TURNS] == metric_again == retried_again
    with serving(str(history_root)) as url:
        _, page = get(f"{url}/runs/{first}")
    usage = page.split('<table class="usage">', 1)[1].split("</table>", 1)[0]
    assert f'<td>{RETRIED_TURNS}</td><td class="num">{retried}</td>' in usage
