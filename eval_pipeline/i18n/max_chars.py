"""``max_chars``: the translation fits its length budget in user-perceived characters.

The count is of the translation as written (placeholders count as their written characters,
since their run-time values are unknown), segmented by :mod:`eval_pipeline.i18n.graphemes`.
"""

from __future__ import annotations

from eval_pipeline.i18n.case import EvalCase, max_chars_limit
from eval_pipeline.i18n.graphemes import grapheme_count
from eval_pipeline.i18n.params import MaxChars
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok
from eval_pipeline.predicates.explain import excerpt


@assertion_check("max_chars")
def max_chars(case: EvalCase, spec: MaxChars, candidate: Candidate) -> list[Finding]:
    limit = max_chars_limit(case, spec)
    count = grapheme_count(candidate.text)
    if count > limit:
        return [
            fail(
                "max_chars_exceeded",
                f"“{excerpt(candidate.text)}” is {count} characters, over the budget of {limit}: shorten it.",
                limit=limit,
                count=count,
            )
        ]
    return [ok(f"{count} characters fit the budget of {limit}.", limit=limit, count=count)]
