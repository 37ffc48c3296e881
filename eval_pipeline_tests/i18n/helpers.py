"""Build EvalCase v1 cases and run one assertion on a candidate text."""

from __future__ import annotations

from typing import Any

from eval_pipeline.i18n import AssertionResult, Candidate, EvalCase, check_case


def case_dict(source: str, *assertions: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "id": fields.pop("id", "test.case.001"),
        "source_locale": fields.pop("source_locale", "en-US"),
        "target_locale": fields.pop("target_locale", "zh-Hans"),
        "domain": "game-ui",
        "source": source,
        "assertions": list(assertions),
        "provenance": {"kind": "synthetic", "license": "CC0-1.0"},
        **fields,
    }


def assertion(name: str, severity: str = "hard", **params: Any) -> dict[str, Any]:
    return {"name": name, "severity": severity, "params": params}


def make_case(source: str, *assertions: dict[str, Any], **fields: Any) -> EvalCase:
    return EvalCase.model_validate(case_dict(source, *assertions, **fields))


def results(case: EvalCase, text: str, raw_response: str | None = None) -> list[AssertionResult]:
    return check_case(case, Candidate(case_id=case.id, text=text, raw_response=raw_response))


def codes(case: EvalCase, text: str, raw_response: str | None = None) -> list[str]:
    return sorted({r.code for r in results(case, text, raw_response)})


def placeholder_codes(
    source: str, text: str, syntax: str = "auto", target: str = "zh-Hans", **params: Any
) -> list[str]:
    case = make_case(
        source, assertion("placeholder_integrity", syntax=syntax, **params), target_locale=target
    )
    return codes(case, text)
