"""EvalCase v1 (seed §3): one public translation case per JSONL line, validated at the edge.

Every rule of §3 is enforced here: schema_version 1, the id shape, canonical locale tags that
CLDR knows, a non-empty list of v1 assertions with valid params, provenance kind and licence,
typed optional fields with their defaults, and no unknown fields (v1 has no extension point:
an unknown field is rejected rather than silently ignored). Ids unique across a lane's files
are checked where files are loaded together (:class:`eval_pipeline.cases.CaseStream`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from eval_pipeline.i18n.icu import parse_icu
from eval_pipeline.i18n.locales import locale_problem
from eval_pipeline.i18n.params import (
    AssertionSpec,
    MaxChars,
    PlaceholderIntegrity,
    ProtocolComplete,
    RequiredTokens,
)
from eval_pipeline.i18n.placeholders import PlaceholderSyntaxError, detect_syntax, flat_tokenizer

CASE_ID = r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+$"
SLUG = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
# SPDX license expression: ids (optionally LicenseRef-…, a trailing +) joined by AND / OR / WITH, parentheses.
_SPDX_ID = r"[A-Za-z0-9][A-Za-z0-9.\-]*\+?"
_SPDX_TOKEN = re.compile(rf"\(|\)|AND|OR|WITH|{_SPDX_ID}")
NOT_A_LICENSE = frozenset(
    {"unknown", "fair-use", "fair use", "none", "n/a", "na", "tbd", "todo", "unlicensed"}
)

ProvenanceKind = Literal["synthetic", "public-domain", "compatible-licensed", "authorized-regression"]


def spdx_problem(expression: str) -> str | None:
    """Why ``expression`` is not an SPDX-style licence expression; None when it is one."""
    text = expression.strip()
    if not text:
        return "licence is blank: write an SPDX expression such as 'GPL-3.0-or-later'"
    if text.lower() in NOT_A_LICENSE:
        return f"{text!r} is not a licence: write an SPDX expression such as 'CC0-1.0' or 'MIT'"
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    depth, expect_operand = 0, True
    for token in tokens:
        if token == "(" and expect_operand:
            depth += 1
        elif token == ")" and not expect_operand and depth > 0:
            depth -= 1
        elif token in {"AND", "OR", "WITH"} and not expect_operand:
            expect_operand = True
        elif expect_operand and _SPDX_TOKEN.fullmatch(token) and token not in {"AND", "OR", "WITH"}:
            if token.lower() in NOT_A_LICENSE or not re.search(r"\d|^[A-Z]|^LicenseRef-", token):
                return f"{token!r} does not look like an SPDX licence identifier"
            expect_operand = False
        else:
            return f"{text!r} is not an SPDX licence expression (e.g. 'MIT', 'GPL-3.0-or-later', 'Apache-2.0 OR MIT')"
    if expect_operand or depth:
        return f"{text!r} is an incomplete SPDX licence expression"
    return None


def _refused_by(problem_of: Callable[[str], str | None]) -> AfterValidator:
    """A field's validator: a value ``problem_of`` finds a problem with is invalid, in its words."""

    def check(value: str) -> str:
        problem = problem_of(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


class Provenance(BaseModel):
    """Where a case came from and on what terms it may be redistributed (§3.4)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    kind: ProvenanceKind
    license: Annotated[str, _refused_by(spdx_problem)]
    source: str | None = Field(default=None, min_length=1, description="Identifier or URL of the origin.")
    transformation: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _external_needs_source(self) -> Provenance:
        if self.kind in {"public-domain", "compatible-licensed"} and self.source is None:
            raise ValueError(f"provenance of kind {self.kind!r} must name its 'source' (identifier or URL)")
        return self


Locale = Annotated[
    str,
    _refused_by(locale_problem),
    Field(description="Canonical BCP-47-style tag, e.g. 'en-US', 'zh-Hans'."),
]
Slug = Annotated[str, Field(pattern=SLUG)]


class EvalCase(BaseModel):
    """One EvalCase v1 record."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        title="EvalCase v1",
        json_schema_extra={"$comment": "evals/i18n-prompt/contract.md describes every field and rule."},
    )

    schema_version: Literal[1]
    id: str = Field(pattern=CASE_ID, description="Lowercase ASCII segments separated by '.'.")
    source_locale: Locale
    target_locale: Locale
    domain: str = Field(pattern=SLUG, max_length=40)
    source: str = Field(min_length=1)
    context: dict[str, Any] = Field(
        default_factory=dict, description="Non-secret context: string, number or boolean values."
    )
    required_tokens: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    # After the fields above, so that its validator can check each assertion against them.
    assertions: list[AssertionSpec] = Field(min_length=1)
    provenance: Provenance
    references: list[str] = Field(default_factory=list)
    difficulty: Literal["basic", "intermediate", "advanced"] | None = None
    tags: list[Slug] = Field(default_factory=list)

    @field_validator("schema_version", mode="before")
    @classmethod
    def _exact_version(cls, value: Any) -> Any:
        # Literal[1] alone also matches True and 1.0 (they compare equal to 1); §3.1 says integer 1.
        if type(value) is not int:
            raise ValueError(
                f"schema_version must be the integer 1 (got {json.dumps(value, default=str)[:40]})"
            )
        return value

    @field_validator("context")
    @classmethod
    def _scalar_context(cls, context: dict[str, Any]) -> dict[str, Any]:
        bad = sorted(k for k, v in context.items() if not isinstance(v, str | int | float | bool))
        if bad:
            raise ValueError(
                f"context values must be a string, number or boolean; not so for: {', '.join(bad)}"
            )
        return context

    @field_validator("assertions")
    @classmethod
    def _assertions_fit_case(cls, assertions: list[Any], info: ValidationInfo) -> list[Any]:
        names = [a.name for a in assertions]
        problems = [f"{n} is listed more than once" for n in sorted({n for n in names if names.count(n) > 1})]
        if {"source", "context", "required_tokens"} <= info.data.keys():
            problems += [
                f"[{i}] {spec.name}: {problem}"
                for i, spec in enumerate(assertions)
                for problem in _RULES[spec.name](spec, info.data)
            ]
        if problems:
            raise ValueError("; ".join(problems))
        return assertions

    def assertion(self, name: str) -> Any | None:
        return next((a for a in self.assertions if a.name == name), None)

    @property
    def protocol(self) -> ProtocolComplete | None:
        spec = self.assertion("protocol_complete")
        return spec if isinstance(spec, ProtocolComplete) else None

    @property
    def placeholder_spec(self) -> PlaceholderIntegrity | None:
        spec = self.assertion("placeholder_integrity")
        return spec if isinstance(spec, PlaceholderIntegrity) else None

    def batch_items(self) -> list[str]:
        """A protocol case's source is its batch: one item per line."""
        return self.source.split("\n")


def _placeholder_rule(spec: PlaceholderIntegrity, case: dict[str, Any]) -> list[str]:
    syntax: str = spec.params.syntax
    if syntax == "auto":
        syntax = detect_syntax(case["source"])
    try:
        if syntax == "icu":
            parse_icu(case["source"])
        elif syntax != "none":
            flat_tokenizer(syntax, case["source"], spec.params.pattern)(case["source"])
    except PlaceholderSyntaxError as exc:
        return [f"the source is not valid {syntax}: {exc}"]
    return []


def _protocol_rule(spec: ProtocolComplete, case: dict[str, Any]) -> list[str]:
    items = case["source"].split("\n")
    problems = [
        f"batch item {i} (source line {i}) is empty" for i, item in enumerate(items, 1) if not item.strip()
    ]
    expected = spec.params.expected_items
    if expected is not None and expected != len(items):
        problems.append(f"expected_items is {expected} but the source holds {len(items)} item line(s)")
    return problems


def _required_tokens_rule(spec: RequiredTokens, case: dict[str, Any]) -> list[str]:
    if spec.params.tokens is None and not case["required_tokens"]:
        return ["no tokens to require: set params.tokens or the case's required_tokens"]
    return []


def _max_chars_rule(spec: MaxChars, case: dict[str, Any]) -> list[str]:
    budget = case["context"].get("max_chars")
    if spec.params.limit is None and not (
        isinstance(budget, int) and not isinstance(budget, bool) and budget > 0
    ):
        return ["no budget: set params.limit or context.max_chars to a positive integer"]
    return []


def _no_rule(spec: Any, case: dict[str, Any]) -> list[str]:
    return []


# Rules that tie an assertion to the rest of its case, by assertion name.
_RULES: dict[str, Callable[[Any, dict[str, Any]], list[str]]] = {
    "placeholder_integrity": _placeholder_rule,
    "protocol_complete": _protocol_rule,
    "required_tokens": _required_tokens_rule,
    "max_chars": _max_chars_rule,
    "number_fidelity": _no_rule,
    "forbidden_renderings": _no_rule,
}


def max_chars_limit(case: EvalCase, spec: MaxChars) -> int:
    if spec.params.limit is not None:
        return spec.params.limit
    return int(case.context["max_chars"])


def required_token_list(case: EvalCase, spec: RequiredTokens) -> list[str]:
    return list(spec.params.tokens) if spec.params.tokens is not None else list(case.required_tokens)
