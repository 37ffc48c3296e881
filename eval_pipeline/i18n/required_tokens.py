"""``required_tokens``: literal tokens that must survive (or appear) in the translation.

Each token must occur at least as often as in the source, and at least once. Matching is
literal substring counting, case-sensitive unless ``case_sensitive: false``.
"""

from __future__ import annotations

from eval_pipeline.i18n.case import EvalCase, required_token_list
from eval_pipeline.i18n.params import RequiredTokens
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok


def occurrences(text: str, token: str, *, case_sensitive: bool) -> int:
    return text.count(token) if case_sensitive else text.casefold().count(token.casefold())


@assertion_check("required_tokens")
def required_tokens(case: EvalCase, spec: RequiredTokens, candidate: Candidate) -> list[Finding]:
    tokens = required_token_list(case, spec)
    sensitive = spec.params.case_sensitive
    findings: list[Finding] = []
    for token in dict.fromkeys(tokens):
        needed = max(1, occurrences(case.source, token, case_sensitive=sensitive))
        found = occurrences(candidate.text, token, case_sensitive=sensitive)
        if found == 0:
            findings.append(
                fail("required_token_missing", f"Required token {token!r} is missing.", token=token)
            )
        elif found < needed:
            findings.append(
                fail(
                    "required_token_count_mismatch",
                    f"Required token {token!r} occurs {found} time(s); the source has {needed}.",
                    token=token,
                    expected_count=needed,
                    actual_count=found,
                )
            )
    return findings or [ok("Every required token is present.", tokens=list(dict.fromkeys(tokens)))]
