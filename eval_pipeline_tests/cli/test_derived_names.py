"""A runtime given as an ad-hoc spec runs under a derived name (``openai-1a2b3c4d``), which says
nothing: every command that shows it says what it stands for, its spec and options, as the
run stored them (``run_manifests.runtime_spec`` and ``runtime_options``), never a secret.
History written before the options were stored still reads, decoded from the spec alone."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_OK
from eval_pipeline.history import connect
from eval_pipeline.runtimes.names import stands_for
from eval_pipeline.runtimes.redaction import redacted_options
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline.runtimes.targets import derived_name
from eval_pipeline.tables import SCHEMAS
from eval_pipeline.viewer.pages import runtime_specs
from eval_pipeline_tests.history.viewer_server import get, serving
from eval_pipeline_tests.runtimes.helpers import served_reference

LANE = "refusal_calibration"
SECRET = "sk-planted0123456789"
runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == EXIT_OK, result.output
    return result.stdout


def lines(output: str) -> list[str]:
    """The lines of ``output``, without their indent (a decoded name is a line of its own, never wrapped)."""
    return [line.strip() for line in output.splitlines()]


def run_ids(runtime: str) -> list[str]:
    rows = json.loads(invoke("history", "-f", "json"))
    return [str(r["run_id"]) for r in rows if r["runtime"] == runtime]


@pytest.mark.slow
def test_show_diff_and_compare_say_what_a_derived_name_stands_for(history_root: Path) -> None:
    with served_reference(ServeConfig(retry_after_s=0.0)) as server:
        spec = f"openai:{server.base_url}"
        options = {"model": "reference", "headers": {"Authorization": f"Bearer {SECRET}"}}
        name = derived_name(spec, options)
        for _ in range(2):  # two runs: diff has a pair
            invoke(
                "run", "--lane", LANE, "--runtime", spec, "-o", "model=reference",
                "-o", f'headers={{"Authorization": "Bearer {SECRET}"}}',
            )  # fmt: skip
    invoke("run", "--lane", LANE)  # the reference, to compare with
    decoded = stands_for(spec, options)
    assert server.base_url in decoded and '"model": "reference"' in decoded and SECRET not in decoded
    line = f"runtime {name}: {decoded}"
    first, second = run_ids(name)

    shown = invoke("show", first[:8])
    assert line in lines(shown), shown
    case = invoke("show", first[:8], "--case", "refusal_oog_zylphraxonin_001")
    assert line in lines(case), case
    assert line in lines(invoke("diff", first, second))
    assert line in lines(invoke("flaky", "--lane", LANE))
    (pair,) = json.loads(invoke("diff", first, second, "-f", "json"))
    assert pair["runtime_a_stands_for"] == pair["runtime_b_stands_for"] == decoded
    compared = invoke("compare", "--lane", LANE, "--runtime", "reference", "--runtime", name)
    assert f"B: {name} ({decoded})  run {second[:8]}" in compared
    document = json.loads(
        invoke("compare", "--lane", LANE, "--runtime", "reference", "--runtime", name, "--json")
    )
    assert (document["a"]["runtime_stands_for"], document["b"]["runtime_stands_for"]) == (None, decoded)
    assert f"{name}: {decoded}" in invoke("history").splitlines()
    root = str(history_root)
    with connect(root) as con:
        assert runtime_specs(con)[name] == decoded  # the viewer's, options and all
    with serving(root) as url:
        _, page = get(f"{url}/runs/{first}")
    assert f"spec {decoded}".replace('"', "&#34;") in page
    for text in (shown, case, page, invoke("history", "-f", "json")):
        assert SECRET not in text
    assert not [p for p in history_root.rglob("*.parquet") if SECRET.encode() in p.read_bytes()]


def test_history_without_stored_options_still_reads_and_decodes_the_spec(history_root: Path) -> None:
    """A manifest written before ``runtime_options`` existed: the run is listed and its derived
    name is decoded from the spec it stored."""
    name = derived_name("reference:no-refusal", {})
    old = SCHEMAS["run_manifests"].remove(SCHEMAS["run_manifests"].get_field_index("runtime_options"))
    row = {f.name: None for f in old}
    row.update(
        run_id="run-old", lane=LANE, split="public", runtime=name, case_set="public",
        runtime_spec="reference:no-refusal", partition_date="2024-01-02", tables="",
    )  # fmt: skip
    folder = history_root / "run_manifests" / f"lane={LANE}" / "date=2024-01-02"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=old), folder / "run-old.parquet")
    assert f"{name}: reference:no-refusal" in invoke("history").splitlines()
    with connect(str(history_root)) as con:
        assert runtime_specs(con) == {name: "reference:no-refusal"}
        assert con.execute("SELECT runtime_options FROM runs").fetchall() == [(None,)]


def test_options_are_stored_and_shown_without_the_secrets_a_list_holds() -> None:
    """History stores a target's options beside its spec: a secret inside a list of them is
    redacted like one anywhere else."""
    options = {
        "paths": [f"https://u:{SECRET}@host/pkg", "."],
        "header_envs": {"Authorization": "TOKEN_VAR"},
        "request_params": {"stop": [f"Bearer {SECRET}", SECRET]},
    }
    shown = redacted_options(options)
    assert SECRET not in json.dumps(shown) and shown["paths"][1] == "."
    assert SECRET not in stands_for("exec:bot", options)
