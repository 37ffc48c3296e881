"""The production instance profile on a real PostgreSQL: two lane runs through it, then their
runs and check results read back from Postgres by a fresh instance."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg2
import pytest

from eval_pipeline.dagster_wiring.checks import GATE_CHECK
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.tags import LANE_TAG
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.paths import PROJECT_ROOT

from . import servers

pytestmark = pytest.mark.slow

LANE = "deterministic_fluency"
PROFILE = PROJECT_ROOT / "deploy" / "dagster.production.yaml"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Postgres]:
    with servers.postgres(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture
def production_home(
    isolated_state: Path, postgres: servers.Postgres, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = isolated_state / "dagster_home"
    shutil.copyfile(PROFILE, home / "dagster.yaml")
    for name, value in postgres.env().items():
        monkeypatch.setenv(name, value)
    return home


def test_two_lane_runs_through_a_postgres_instance(production_home: Path, postgres: servers.Postgres) -> None:
    instance = ensure_instance()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    coordinator = instance.run_coordinator
    assert type(coordinator).__name__ == "QueuedRunCoordinator"
    assert instance.run_monitoring_enabled

    spec = find_lane(LANE)
    outcomes = [
        materialize_lane(spec, find_target(name), lane_request("public", "2026-11-30"), instance=instance)
        for name in ("reference", "reference-no-gloss")
    ]
    assert all(o.success for o in outcomes), [o.failure for o in outcomes]

    # A fresh instance (a new process would do the same) reads both runs back from Postgres.
    fresh = dg.DagsterInstance.get()
    runs = fresh.get_runs(dg.RunsFilter(tags={LANE_TAG: LANE}))
    assert {r.run_id: r.status for r in runs} == {o.run_id: dg.DagsterRunStatus.SUCCESS for o in outcomes}
    for outcome in outcomes:
        stored = {
            event.asset_check_evaluation_data.check_name: event.asset_check_evaluation_data.passed
            for event in (
                record.dagster_event
                for record in fresh.all_logs(
                    outcome.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
                )
            )
            if event is not None
        }
        # the outcome lists the thresholds one by one; the gate restates the ERROR ones
        assert stored.pop(GATE_CHECK) is True
        assert stored == {c.name: c.passed for c in outcome.checks}
        assert stored  # the lane has threshold checks
    no_gloss = {c.name: c.passed for c in outcomes[1].checks}
    assert no_gloss["no_dotted_inventory_rate"] is False  # the two runs really differ

    with (
        psycopg2.connect(
            host=postgres.host, port=postgres.port, user=postgres.user, dbname="dagster"
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute("SELECT run_id FROM runs")
        assert {o.run_id for o in outcomes} <= {row[0] for row in cursor.fetchall()}
