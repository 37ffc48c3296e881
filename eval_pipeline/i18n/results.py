"""What a check receives and returns (EvalCase v1 §5 and §6): a Candidate in, AssertionResults out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.i18n.params import Severity

OK = "ok"
CANDIDATE_ERROR = "candidate_error"


class Candidate(BaseModel):
    """One translation to check: the decoded text, and the raw reply when a protocol must be inspected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case_id: str
    text: str
    raw_response: str | None = None


class AssertionResult(BaseModel):
    """Exactly the §6 fields. ``code`` is machine-stable; ``message`` is for people."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case_id: str
    assertion: str
    passed: bool
    severity: Severity
    code: str
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    """One outcome of one assertion family, before it is stamped with case id, name and severity."""

    passed: bool
    code: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def ok(message: str, **evidence: Any) -> Finding:
    return Finding(True, OK, message, evidence)


def fail(code: str, message: str, **evidence: Any) -> Finding:
    return Finding(False, code, message, evidence)
