"""Runtime versions: the digest changes exactly when what a scheme says pins its behaviour changes."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from eval_pipeline.dagster_wiring.runtime_targets import observed_versions
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.reference.pack import pack_sha256
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.runtimes.versions import runtime_version
from eval_pipeline_tests.paths import PROJECT_ROOT
from eval_pipeline_tests.runtimes.helpers import served_reference

EMBEDDED_PACK = PROJECT_ROOT / "eval_pipeline" / "runtimes" / "reference" / "pack.json"


def digest(spec: str, **options: object) -> str:
    return runtime_version(spec, options).digest


def test_reference_is_pinned_by_its_pack_and_mode(tmp_path: Path) -> None:
    pack = tmp_path / "pack.json"
    shutil.copyfile(EMBEDDED_PACK, pack)
    assert runtime_version("reference", {}).facts["pack_sha256"] == pack_sha256()
    assert digest("reference", pack=str(pack)) == digest("reference", pack=str(pack))
    assert digest("reference") != digest("reference:no-gloss")
    before = digest("reference", pack=str(pack))
    data = json.loads(pack.read_text(encoding="utf-8"))
    data["concepts"]["truth"]["gloss"] = "Truth is what a claim has when it matches the world."
    pack.write_text(json.dumps(data), encoding="utf-8")
    assert digest("reference", pack=str(pack)) != before


def test_the_reference_runtime_answers_from_the_pack_its_option_names(tmp_path: Path) -> None:
    pack = tmp_path / "pack.json"
    data = json.loads(EMBEDDED_PACK.read_text(encoding="utf-8"))
    data["pack_id"] = "review_copy"
    pack.write_text(json.dumps(data), encoding="utf-8")
    session = build_runtime("reference", {"pack": str(pack)}).open_session("s")
    assert "review_copy" in session.send("What is truth?").surface
    with pytest.raises(RuntimeSpecError, match=r"reference pack .*missing\.json: FileNotFoundError"):
        build_runtime("reference", {"pack": str(tmp_path / "missing.json")})
    with pytest.raises(RuntimeSpecError, match="pack: Input should be a valid string"):
        build_runtime("reference", {"pack": 3})


def test_exec_is_pinned_by_its_command_and_the_files_it_names(tmp_path: Path) -> None:
    bot = tmp_path / "bot.py"
    bot.write_text("print('v1')\n", encoding="utf-8")
    spec = f"exec:{sys.executable} {bot}"
    before = digest(spec)
    assert digest(spec) == before
    assert digest(f"{spec} --flag") != before
    bot.write_text("print('v2')\n", encoding="utf-8")
    assert digest(spec) != before
    assert str(bot) in runtime_version(spec, {}).facts["files"]
    with pytest.raises(RuntimeSpecError, match="not an executable file"):
        runtime_version("exec:/no/such/program", {})


def test_python_is_pinned_by_its_module_file(tmp_path: Path) -> None:
    module = tmp_path / "versioned_bot.py"
    module.write_text(
        textwrap.dedent("""
        def make():
            return None
        """),
        encoding="utf-8",
    )
    spec, options = "python:versioned_bot:make", {"paths": [str(tmp_path)]}
    before = runtime_version(spec, options).digest
    module.write_text(module.read_text(encoding="utf-8") + "# changed\n", encoding="utf-8")
    assert runtime_version(spec, options).digest != before
    with pytest.raises(RuntimeSpecError, match="cannot find the source of 'no_such_module_here'"):
        runtime_version("python:no_such_module_here:make", {})


def test_replay_is_pinned_by_its_file(tmp_path: Path) -> None:
    recorded = tmp_path / "turns.jsonl"
    recorded.write_text('{"case_id": "a"}\n', encoding="utf-8")
    before = digest(f"replay:{recorded}")
    recorded.write_text('{"case_id": "b"}\n', encoding="utf-8")
    assert digest(f"replay:{recorded}") != before
    with pytest.raises(RuntimeSpecError, match="cannot hash"):
        digest(f"replay:{tmp_path / 'gone.jsonl'}")


def test_openai_is_pinned_by_what_the_server_lists_for_the_model() -> None:
    with served_reference() as server:
        version = runtime_version(f"openai:{server.base_url}", {"model": "reference"})
        assert version.facts["model"]["id"] == "reference"
        assert runtime_version(f"openai:{server.base_url}", {"model": "reference"}).digest == version.digest
        with pytest.raises(
            RuntimeSpecError, match=r"does not list model 'gpt-x' \(listed: \['reference'\]\)"
        ):
            runtime_version(f"openai:{server.base_url}", {"model": "gpt-x"})
        base_url = server.base_url
    with pytest.raises(RuntimeSpecError, match=f"GET {base_url}/models: APIConnectionError"):
        runtime_version(f"openai:{base_url}", {"model": "reference"})


def test_observation_covers_declared_targets_and_reports_the_ones_it_cannot_read(tmp_path: Path) -> None:
    targets = {
        "reference": RuntimeTarget("reference", "reference", declared=True),
        "gone": RuntimeTarget("gone", f"replay:{tmp_path / 'gone.jsonl'}", declared=True),
    }
    versions, problems = observed_versions(targets, ["reference", "gone", "exec-1a2b3c4d"])
    assert versions == {"reference": runtime_version("reference", {}).digest}
    assert list(problems) == ["gone"] and "cannot hash" in problems["gone"]
