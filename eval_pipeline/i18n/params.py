"""The v1 assertion vocabulary as pydantic models: one model (name, severity, params) per assertion.

A case file names an assertion by ``name``; the discriminated union below picks its model, so
parameters are validated for that assertion and an unknown name or parameter is rejected.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eval_pipeline.metrics import CaseSeverity as Severity

PlaceholderSyntax = Literal["auto", "printf", "python", "icu", "custom"]

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class PlaceholderIntegrityParams(BaseModel):
    model_config = _STRICT

    syntax: PlaceholderSyntax = "auto"
    allow_reorder: bool = True
    pattern: str | None = Field(
        default=None, description="Regular expression matching one placeholder (syntax 'custom' only)."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is None:
            return None
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        if compiled.match(""):
            raise ValueError("pattern must not match the empty string")
        return pattern

    @model_validator(mode="after")
    def _pattern_iff_custom(self) -> PlaceholderIntegrityParams:
        if (self.syntax == "custom") != (self.pattern is not None):
            raise ValueError("syntax 'custom' needs 'pattern', and 'pattern' is only for syntax 'custom'")
        return self


class ProtocolCompleteParams(BaseModel):
    model_config = _STRICT

    expected_items: int | None = Field(
        default=None, gt=0, description="Items in the batch; defaults to the source's line count."
    )
    terminator: str | None = Field(
        default=None, min_length=1, pattern=r"^[^\r\n]+$", description="Line that must end the reply."
    )
    allow_extra_items: bool = False


class NumberFidelityParams(BaseModel):
    model_config = _STRICT

    allow_extra_numbers: bool = False


class RequiredTokensParams(BaseModel):
    model_config = _STRICT

    tokens: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None, min_length=1, description="Tokens to require; defaults to the case's required_tokens."
    )
    case_sensitive: bool = True


class ForbiddenRenderingsParams(BaseModel):
    model_config = _STRICT

    renderings: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    case_sensitive: bool = False


class MaxCharsParams(BaseModel):
    model_config = _STRICT

    limit: int | None = Field(
        default=None, gt=0, description="User-perceived characters; defaults to context.max_chars."
    )


class _Assertion(BaseModel):
    """What every assertion a case names holds: its severity (each model adds its name and params)."""

    model_config = _STRICT

    severity: Severity


class PlaceholderIntegrity(_Assertion):
    name: Literal["placeholder_integrity"]
    params: PlaceholderIntegrityParams = PlaceholderIntegrityParams()


class ProtocolComplete(_Assertion):
    name: Literal["protocol_complete"]
    params: ProtocolCompleteParams = ProtocolCompleteParams()


class NumberFidelity(_Assertion):
    name: Literal["number_fidelity"]
    params: NumberFidelityParams = NumberFidelityParams()


class RequiredTokens(_Assertion):
    name: Literal["required_tokens"]
    params: RequiredTokensParams = RequiredTokensParams()


class ForbiddenRenderings(_Assertion):
    name: Literal["forbidden_renderings"]
    params: ForbiddenRenderingsParams


class MaxChars(_Assertion):
    name: Literal["max_chars"]
    params: MaxCharsParams = MaxCharsParams()


AssertionSpec = Annotated[
    PlaceholderIntegrity
    | ProtocolComplete
    | NumberFidelity
    | RequiredTokens
    | ForbiddenRenderings
    | MaxChars,
    Field(discriminator="name"),
]

ASSERTION_NAMES: tuple[str, ...] = (
    "protocol_complete",
    "placeholder_integrity",
    "number_fidelity",
    "required_tokens",
    "forbidden_renderings",
    "max_chars",
)
