"""``forbidden_renderings``: strings that must not appear in the translation (a translated brand
name, a known mistranslation, a broken placeholder spelling). Literal substring search,
case-insensitive unless ``case_sensitive: true``."""

from __future__ import annotations

from eval_pipeline.i18n.case import EvalCase
from eval_pipeline.i18n.params import ForbiddenRenderings
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.required_tokens import occurrences
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok


@assertion_check("forbidden_renderings")
def forbidden_renderings(case: EvalCase, spec: ForbiddenRenderings, candidate: Candidate) -> list[Finding]:
    sensitive = spec.params.case_sensitive
    findings = [
        fail(
            "forbidden_rendering_present",
            f"Forbidden rendering {rendering!r} appears {found} time(s).",
            rendering=rendering,
            count=found,
        )
        for rendering in spec.params.renderings
        if (found := occurrences(candidate.text, rendering, case_sensitive=sensitive))
    ]
    return findings or [ok("No forbidden rendering appears.", checked=list(spec.params.renderings))]
