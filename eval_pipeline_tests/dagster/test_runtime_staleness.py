"""A runtime change makes results stale: the reference target answers from a copy of its concept
pack; editing the copy changes the target's observed version, and the webserver (the UI's own
GraphQL API, reading the instance) reports the lane's transcripts as stale until the lane runs
again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.runtime_targets import OBSERVE_JOB
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.dagster.processes import graphql, webserver
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

LANE = "deterministic_fluency"
PARTITION = "dev|reference"  # case_set | runtime
DOWNSTREAM = ("transcripts", "turn_predicates", "case_predicates", "metrics", "history")
STALE_QUERY = """
query Stale($keys: [AssetKeyInput!], $partitions: [String!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    staleStatusByPartition(partitions: $partitions)
    staleCausesByPartition(partitions: $partitions) { key { path } partitionKey reason }
  }
}
"""


def stale_status(url: str) -> dict[str, Any]:
    """{stage: (status, [root causes])} of the lane partition, as the UI gets them."""
    keys = [{"path": [LANE, stage]} for stage in DOWNSTREAM]
    nodes = graphql(url, STALE_QUERY, {"keys": keys, "partitions": [PARTITION]})["assetNodes"]
    return {
        node["assetKey"]["path"][-1]: (
            node["staleStatusByPartition"][0],
            [
                ("/".join(c["key"]["path"]), c["partitionKey"], c["reason"])
                for c in node["staleCausesByPartition"][0]
            ],
        )
        for node in nodes
    }


@pytest.fixture
def pack_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An evals folder with the fluency lane and a reference target reading a copy of the pack."""
    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / LANE, evals / LANE)
    pack = tmp_path / "pack.json"
    shutil.copyfile(PROJECT_ROOT / "eval_pipeline" / "runtimes" / "reference" / "pack.json", pack)
    (evals / "runtimes.yaml").write_text(
        f"targets:\n  reference:\n    spec: reference\n    nightly: true\n    options: {{pack: '{pack}'}}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    return pack


def surfaces(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    from eval_pipeline.core.settings import history_root
    from eval_pipeline.history import connect

    with connect(history_root()) as con:
        rows = con.execute("select surface from transcripts where run_id = ?", [run_id]).fetchall()
    return [str(r[0]) for r in rows]


def test_a_changed_reference_pack_makes_the_lane_stale_until_it_runs_again(
    pack_copy: Path, tmp_path: Path
) -> None:
    spec = find_lane(LANE)
    instance = ensure_instance()
    first = materialize_lane(
        spec, find_target("reference"), lane_request("dev", "2026-11-30"), instance=instance
    )
    assert first.success, first.failure
    before = surfaces(instance, first.run_id)
    assert any("en_core_meta_v1" in s for s in before)  # the pack id is in every pack-grounded answer

    observe = build_definitions([spec]).resolve_job_def(OBSERVE_JOB)
    with webserver(tmp_path / "webserver.log") as url:
        assert {stage: status for stage, (status, _) in stale_status(url).items()} == dict.fromkeys(
            DOWNSTREAM, "FRESH"
        )
        # Observing an unchanged runtime again changes nothing.
        assert observe.execute_in_process(instance=instance).success
        assert {stage: status for stage, (status, _) in stale_status(url).items()} == dict.fromkeys(
            DOWNSTREAM, "FRESH"
        )

        # The runtime changes behind its name: a new pack id. Observing the targets (what the
        # hourly schedule and the UI's "Observe" do) records the new version.
        pack = json.loads(pack_copy.read_text(encoding="utf-8"))
        pack["pack_id"] = "en_core_meta_v2"
        pack_copy.write_text(json.dumps(pack), encoding="utf-8")
        assert observe.execute_in_process(instance=instance).success

        stale = stale_status(url)
        # Dagster marks the direct dependent stale (its later stages are not re-judged until it
        # changes); the lane's job re-runs them all.
        assert stale["transcripts"] == ("STALE", [("runtime_targets", "reference", "has a new data version")])

        second = materialize_lane(
            spec, find_target("reference"), lane_request("dev", "2026-11-30"), instance=instance
        )
        assert second.success, second.failure
        assert {stage: status for stage, (status, _) in stale_status(url).items()} == dict.fromkeys(
            DOWNSTREAM, "FRESH"
        )
    after = surfaces(instance, second.run_id)
    assert any("en_core_meta_v2" in s for s in after) and not any("en_core_meta_v1" in s for s in after)
