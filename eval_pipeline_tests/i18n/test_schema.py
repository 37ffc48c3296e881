"""EvalCase v1 schema rules (§3), the validate command, and the committed JSON Schema copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.i18n import EvalCase
from eval_pipeline.i18n.case import spdx_problem
from eval_pipeline.i18n.schema import SCHEMA_FILE, evalcase_v1_schema_text
from eval_pipeline.lanes import find_lane
from eval_pipeline_tests.i18n.helpers import assertion, case_dict

GOOD = case_dict(
    "Welcome, %s!", assertion("placeholder_integrity", syntax="printf"), id="placeholder.printf.001"
)


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def _without(field: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != field}


# One line per broken §3 rule: (case, the field the problem must name).
BROKEN: list[tuple[dict[str, Any], str]] = [
    (_with(schema_version=2), "schema_version"),
    (_with(id="Placeholder Printf 1"), "id"),
    (_with(id="placeholder"), "id"),  # one segment is not the dotted shape
    (_with(source_locale="en_us"), "source_locale"),
    (_with(target_locale="zh-hans"), "target_locale"),
    (_with(target_locale="xx-YY"), "target_locale"),  # well formed, unknown to CLDR
    (_without("domain"), "domain"),
    (_with(source=""), "source"),
    (_with(assertions=[]), "assertions"),
    (_with(assertions=[assertion("placeholder_set")]), "assertions[0]"),
    (_with(assertions=[assertion("max_chars", "blocker", limit=5)]), "assertions[0].max_chars.severity"),
    (
        _with(assertions=[assertion("placeholder_integrity", syntax="fmt")]),
        "assertions[0].placeholder_integrity.params.syntax",
    ),
    (
        _with(assertions=[assertion("protocol_complete", expected_items=0)]),
        "assertions[0].protocol_complete.params.expected_items",
    ),
    (
        _with(assertions=[assertion("forbidden_renderings", renderings=["x"], colour="red")]),
        "assertions[0].forbidden_renderings.params.colour",
    ),
    (_with(assertions=[assertion("max_chars")]), "assertions"),  # no budget anywhere
    (_with(assertions=[assertion("required_tokens")]), "assertions"),  # nothing to require
    (_with(assertions=[assertion("protocol_complete", expected_items=5)]), "assertions"),  # source has 1 line
    (
        _with(source="50%! off", assertions=[assertion("placeholder_integrity", syntax="printf")]),
        "assertions",
    ),
    (_with(assertions=[assertion("max_chars", limit=3), assertion("max_chars", limit=4)]), "assertions"),
    (_with(provenance={"kind": "scraped", "license": "MIT"}), "provenance.kind"),
    (_with(provenance={"kind": "synthetic", "license": "unknown"}), "provenance.license"),
    (_with(provenance={"kind": "synthetic", "license": "fair-use"}), "provenance.license"),
    (_with(provenance={"kind": "synthetic", "license": "  "}), "provenance.license"),
    (_with(provenance={"kind": "public-domain", "license": "CC0-1.0"}), "provenance"),  # no source named
    (_without("provenance"), "provenance"),
    (_with(required_tokens="Steam"), "required_tokens"),
    (_with(references=[1]), "references[0]"),
    (_with(difficulty="easy"), "difficulty"),
    (_with(tags=["Bad Tag"]), "tags[0]"),
    (_with(context={"budget": [1, 2]}), "context"),
    (_with(notes="unknown fields are rejected"), "notes"),
]


def test_the_minimal_seed_case_is_valid_and_defaults_apply() -> None:
    case = EvalCase.model_validate(GOOD)
    assert (case.required_tokens, case.references, case.tags, case.difficulty, case.context) == (
        [],
        [],
        [],
        None,
        {},
    )
    assert case.assertions[0].params.allow_reorder is True


@pytest.mark.parametrize(("broken", "field"), BROKEN, ids=[f for _, f in BROKEN])
def test_each_rule_is_enforced(broken: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError):
        EvalCase.model_validate(broken)


@pytest.mark.parametrize(
    "good", ["MIT", "GPL-3.0-or-later", "Apache-2.0 OR MIT", "(MIT AND CC-BY-4.0)", "GPL-2.0+"]
)
def test_spdx_expressions_accepted(good: str) -> None:
    assert spdx_problem(good) is None


@pytest.mark.parametrize("bad", ["MIT OR", "AND MIT", "(MIT", "unknown", "free to use"])
def test_spdx_expressions_rejected(bad: str) -> None:
    assert spdx_problem(bad) is not None


def test_validate_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    first, second = tmp_path / "broken.jsonl", tmp_path / "more.jsonl"
    first.write_text("".join(json.dumps(case) + "\n" for case, _ in BROKEN) + "{not json\n", encoding="utf-8")
    second.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", "--lane", "i18n_prompt", str(first), str(second)])
    assert result.exit_code == 2
    for line, (_, field) in enumerate(BROKEN, start=1):
        assert f"{first}:{line}: {field}: " in result.output
    assert f"{first}:{len(BROKEN) + 1}: (line): not valid JSON" in result.output
    # ids are unique across all files validated together
    assert f"{second}:2: id: duplicate case id 'placeholder.printf.001'" in result.output


def test_validate_needs_a_lane_for_files_outside_lane_folders(tmp_path: Path) -> None:
    loose = tmp_path / "cases.jsonl"
    loose.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(loose)])
    assert result.exit_code == 2
    assert "--lane" in result.output


def test_the_lane_files_pass_validation() -> None:
    spec = find_lane("i18n_prompt")
    files = [str(p) for split in spec.splits for p in spec.case_files(split)]
    result = CliRunner().invoke(app, ["validate", *files])
    assert result.exit_code == 0, result.output
    assert "no problems" in result.output


def test_default_validate_covers_every_lane() -> None:
    result = CliRunner().invoke(app, ["validate"])
    assert result.exit_code == 0, result.output


def test_lane_cases_follow_the_recommended_id_shape_and_provenance() -> None:
    spec = find_lane("i18n_prompt")
    from eval_pipeline.run.pipeline import load_split

    dev = load_split(spec, "dev")
    assert len(dev) >= 40
    for loaded in [*dev, *load_split(spec, "locked")]:
        case = loaded.case
        assert case.provenance.kind == "synthetic"
        *_, number = case.id.split(".")
        assert case.id.count(".") == 2, case.id
        assert number.isdigit() and len(number) == 3, case.id


def test_schema_command_prints_the_schema_and_the_committed_copy_is_current() -> None:
    result = CliRunner().invoke(app, ["schema", "evalcase-v1"])
    assert result.exit_code == 0
    assert json.loads(result.output)["title"] == "EvalCase v1"
    committed = find_lane("i18n_prompt").folder / SCHEMA_FILE
    assert committed.read_text(encoding="utf-8") == evalcase_v1_schema_text() == result.output, (
        f"regenerate with: eval-pipeline schema evalcase-v1 > evals/i18n-prompt/{SCHEMA_FILE}"
    )
