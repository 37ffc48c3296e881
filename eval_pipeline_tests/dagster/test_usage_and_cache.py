"""A declared target with ``cache: true`` and a ``price``, through a real Dagster instance and a
real local server: the run's exact cost in history and in the metrics' metadata, and a second
run answered wholly from the cache (0 requests counted at the server)."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.settings import history_root
from eval_pipeline.dagster_wiring.checks import rounded, series_label
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.history import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.serve import ReferenceServer
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.paths import PROJECT_ROOT
from eval_pipeline_tests.runtimes.helpers import served_reference

LANE = "deterministic_fluency"
PRICE_IN, PRICE_OUT = 3.0, 15.0


@pytest.fixture
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReferenceServer]:
    """An evals folder with the fluency lane and a cached, priced target served on 127.0.0.1."""
    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, evals / LANE)
    with served_reference() as server:
        (evals / "runtimes.yaml").write_text(
            "targets:\n"
            "  priced:\n"
            f"    spec: openai:{server.base_url}\n"
            "    options: {model: reference}\n"
            "    cache: true\n"
            f"    price: {{input: {PRICE_IN}, output: {PRICE_OUT}}}\n",
            encoding="utf-8",
        )
        monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
        yield server


@pytest.mark.slow
def test_a_priced_cached_target_costs_exactly_its_tokens_and_runs_again_for_nothing(
    priced: ReferenceServer,
) -> None:
    spec, target = find_lane(LANE), find_target("priced")
    assert target.cache and target.price is not None
    instance = ensure_instance()
    first = materialize_lane(spec, target, lane_request("dev", "2026-12-01"), instance=instance)
    assert first.success, first.failure
    sent = priced.requests
    with connect(history_root()) as con:
        turns = con.execute(
            "SELECT prompt_tokens, completion_tokens, cost, cached FROM transcripts WHERE run_id = ?",
            [first.run_id],
        ).fetchall()
        stored = dict(
            con.execute("SELECT metric, value FROM metrics WHERE run_id = ?", [first.run_id]).fetchall()
        )
    assert sent == len(turns) > 0 and not any(cached for *_, cached in turns)
    expected = math.fsum((p * PRICE_IN + c * PRICE_OUT) / 1e6 for p, c, *_ in turns)
    assert all(cost == (p * PRICE_IN + c * PRICE_OUT) / 1e6 for p, c, cost, _ in turns)
    assert stored["cost"] == expected and stored["turns_driven"] == len(turns)
    assert stored["prompt_tokens"] == sum(p for p, *_ in turns)
    event = instance.get_latest_materialization_event(dg.AssetKey([LANE, "metrics"]))
    assert event is not None and event.asset_materialization is not None
    plotted = event.asset_materialization.metadata
    (label,) = [name for name in plotted if name.startswith("cost · ")]  # plotted per series
    assert label == series_label("cost", label.removeprefix("cost · "))
    assert plotted[label].value == rounded(expected)  # the UI's plot, rounded as every plotted value

    second = materialize_lane(spec, target, lane_request("dev", "2026-12-01"), instance=instance)
    assert second.success, second.failure
    assert priced.requests == sent  # 0 requests: every session came from the cache
    transcripts = instance.get_latest_materialization_event(dg.AssetKey([LANE, "transcripts"]))
    assert transcripts is not None and transcripts.asset_materialization is not None
    told = transcripts.asset_materialization.metadata
    assert told["cache_sessions_hit"].value == len(turns) and told["cache_sessions_sent"].value == 0
    with connect(history_root()) as con:
        again = dict(
            con.execute("SELECT metric, value FROM metrics WHERE run_id = ?", [second.run_id]).fetchall()
        )
    assert again["cached_turns"] == len(turns) and again["cost"] == expected
