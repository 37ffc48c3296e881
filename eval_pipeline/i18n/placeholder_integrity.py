"""``placeholder_integrity``: identity, multiplicity and (where asked) order of placeholders."""

from __future__ import annotations

from eval_pipeline.i18n.case import EvalCase
from eval_pipeline.i18n.icu import check_icu
from eval_pipeline.i18n.params import PlaceholderIntegrity
from eval_pipeline.i18n.placeholders import (
    PlaceholderSyntaxError,
    Tokens,
    brace_tokens,
    check_flat,
    detect_syntax,
    flat_tokenizer,
    printf_tokens,
)
from eval_pipeline.i18n.registry import assertion_check
from eval_pipeline.i18n.results import Candidate, Finding, fail, ok


def effective_syntax(case: EvalCase, spec: PlaceholderIntegrity) -> str:
    """The declared syntax, or for ``auto`` the one detected in the source (``none`` when there is none)."""
    return detect_syntax(case.source) if spec.params.syntax == "auto" else spec.params.syntax


@assertion_check("placeholder_integrity")
def placeholder_integrity(case: EvalCase, spec: PlaceholderIntegrity, candidate: Candidate) -> list[Finding]:
    syntax = effective_syntax(case, spec)
    allow_reorder = spec.params.allow_reorder
    if syntax == "icu":
        return check_icu(case.source, candidate.text, case.target_locale, allow_reorder=allow_reorder)
    if syntax == "none":
        return _no_placeholders(candidate.text)
    tokenize = flat_tokenizer(syntax, case.source, spec.params.pattern)
    return check_flat(case.source, candidate.text, tokenize, allow_reorder=allow_reorder)


def _no_placeholders(text: str) -> list[Finding]:
    """A source without placeholders: the translation must not grow printf directives or brace fields."""
    found: list[str] = []
    for tokenize in (printf_tokens, brace_tokens):
        try:
            tokens: Tokens = tokenize(text)
        except PlaceholderSyntaxError:
            continue  # a literal '%' or '{' in plain text is text, not a placeholder
        found.extend(p.text for p in tokens.items)
    if found:
        return [
            fail("placeholder_extra", f"Placeholder {found[0]} is not in the source.", actual=item)
            for item in found
        ]
    return [ok("The source has no placeholders and the translation adds none.", placeholders=[])]
