"""Runtime targets: the declared file, its problems at file:line, and names for raw specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cases.loading import CaseFileError
from eval_pipeline.cli import app
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.targets import TargetsFileError, derived_name, load_targets, resolve_target
from eval_pipeline_tests.paths import PROJECT_ROOT


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runtimes.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(TargetsFileError) as caught:
        load_targets(path)
    return [str(p) for p in caught.value.problems]


def test_the_project_declares_reference_and_reference_no_gloss() -> None:
    targets = load_targets(PROJECT_ROOT / "evals" / "runtimes.yaml")
    assert targets["reference"].spec == "reference" and targets["reference"].nightly
    assert targets["reference-no-gloss"].spec == "reference:no-gloss"
    assert all(t.declared for t in targets.values())


def test_every_problem_is_reported_with_its_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "targets:\n"
        "  good: {spec: reference}\n"
        "  Bad Name: {spec: reference}\n"
        "  no-spec: {nightly: true}\n"
        "  typo:\n"
        "    spec: reference\n"
        "    nightlly: true\n"
        "  lax: {spec: reference, nightly: 'yes'}\n"
        "  good: {spec: 'reference:no-gloss'}\n"
        "extra: 1\n",
    )
    found = problems(path)
    assert f"{path}:3: targets.Bad Name: a target name must match" in found[1] or any(
        p.startswith(f"{path}:3: targets.Bad Name: a target name must match") for p in found
    )
    assert f"{path}:4: targets.no-spec.spec: Field required" in found
    assert any(p.startswith(f"{path}:7: targets.typo.nightlly: Extra inputs") for p in found)
    assert any(p.startswith(f"{path}:8: targets.lax.nightly: Input should be a valid boolean") for p in found)
    assert f"{path}:9: targets.good: duplicate key (first at line 2)" in found
    assert f"{path}:10: extra: unknown key (expected: targets)" in found


def test_not_a_mapping_and_invalid_yaml(tmp_path: Path) -> None:
    assert problems(write(tmp_path, "- reference\n")) == [
        f"{tmp_path / 'runtimes.yaml'}:1: targets: expected a mapping of target name → spec",
    ]
    (found,) = problems(write(tmp_path, "targets: {a: [\n"))
    assert found.startswith(f"{tmp_path / 'runtimes.yaml'}:2: (yaml): not valid YAML")


def test_the_error_names_the_targets_file_not_case_files(tmp_path: Path) -> None:
    path = write(tmp_path, "targets: {}\n")
    with pytest.raises(TargetsFileError) as caught:
        load_targets(path)
    assert not isinstance(caught.value, CaseFileError)
    assert (
        str(caught.value)
        == f"1 problem(s) in the runtime targets file:\n  {path}:1: targets: declares no target"
    )


def test_a_raw_spec_is_its_declared_target_or_a_stable_derived_name() -> None:
    targets = load_targets(PROJECT_ROOT / "evals" / "runtimes.yaml")
    assert resolve_target("reference:no-gloss", {}, targets).name == "reference-no-gloss"
    adhoc = resolve_target("replay:/tmp/turns.jsonl", {}, targets)
    assert adhoc.name == derived_name("replay:/tmp/turns.jsonl", {}) and adhoc.name.startswith("replay-")
    assert not adhoc.declared
    assert resolve_target("replay:/tmp/turns.jsonl", {}, targets).name == adhoc.name  # stable
    assert resolve_target("replay:/tmp/other.jsonl", {}, targets).name != adhoc.name
    # Options are part of what was measured: the same spec with other options is another series.
    tuned = resolve_target("reference", {"concurrency": 2}, targets)
    assert tuned.name != "reference" and not tuned.declared
    with pytest.raises(RuntimeSpecError, match="empty"):
        resolve_target("  ", {}, targets)


def test_cli_reports_a_bad_targets_file_and_an_empty_runtime_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    evals = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals", evals)
    (evals / "runtimes.yaml").write_text(
        "targets:\n  x: {spec: reference, nightly: maybe}\n", encoding="utf-8"
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    result = CliRunner().invoke(app, ["run", "--lane", "deterministic_fluency", "--split", "dev"])
    assert result.exit_code == 2
    assert f"{evals / 'runtimes.yaml'}:2: targets.x.nightly:" in result.stderr
    monkeypatch.delenv("EVAL_PIPELINE_EVALS")
    result = CliRunner().invoke(app, ["run", "--lane", "deterministic_fluency", "--runtime", ""])
    assert result.exit_code == 2 and "empty" in result.stderr


def test_a_target_names_its_celery_queue_and_a_bad_queue_is_a_problem(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "targets:\n  fast: {spec: reference}\n  slow: {spec: 'reference:no-gloss', queue: slow-gateway}\n",
    )
    targets = load_targets(path)
    assert targets["fast"].queue is None and targets["slow"].queue == "slow-gateway"
    # a declared target with overriding options is its own series, on the same queue
    assert resolve_target("slow", {"x": 1}, targets).queue == "slow-gateway"
    bad = write(tmp_path, "targets:\n  slow:\n    spec: reference\n    queue: 'two words'\n")
    assert [p.split(": ")[1] for p in problems(bad)] == ["targets.slow.queue"]
    assert problems(bad)[0].startswith(f"{bad}:4:")  # the line of the field itself


def test_a_runs_queue_is_its_tag_else_its_targets_else_the_shared_one() -> None:
    pytest.importorskip("dagster_celery")
    from eval_pipeline.dagster_wiring.celery import DEFAULT_QUEUE, QUEUE_TAG, queue_for_run

    queues = {"fast": None, "slow": "slow-gateway"}
    partition = "dagster/partition/runtime"
    assert queue_for_run({partition: "slow"}, lambda: queues) == "slow-gateway"
    assert queue_for_run({partition: "fast"}, lambda: queues) == DEFAULT_QUEUE
    assert queue_for_run({partition: "ad-hoc-1234"}, lambda: queues) == DEFAULT_QUEUE
    assert queue_for_run({partition: "slow", QUEUE_TAG: "urgent"}, lambda: queues) == "urgent"


def test_pool_limit_is_an_optional_bounded_integer(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "targets:\n  api: {spec: reference, pool_limit: 2}\n  free: {spec: reference}\n"
        "  zero: {spec: reference, pool_limit: 0}\n  text: {spec: reference, pool_limit: 'two'}\n",
    )
    found = problems(path)
    assert any(
        p.startswith(f"{path}:4: targets.zero.pool_limit: Input should be greater than or equal to 1")
        for p in found
    )
    assert any(
        p.startswith(f"{path}:5: targets.text.pool_limit: Input should be a valid integer") for p in found
    )
    good = write(tmp_path, "targets:\n  api: {spec: reference, pool_limit: 2}\n  free: {spec: reference}\n")
    targets = load_targets(good)
    assert (targets["api"].pool_limit, targets["free"].pool_limit) == (2, None)
