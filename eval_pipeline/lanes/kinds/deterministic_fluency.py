"""deterministic_fluency: six structural predicates over each case's final surface (seeds 000/001)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval_pipeline.lanes.kind import Thread, register_lane_kind, scripted_thread
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.predicates import TurnView, Verdict, get_turn_predicate
from eval_pipeline.predicates.explain import reason
from eval_pipeline.predicates.rows import case_row, stored_verdict, turn_row
from eval_pipeline.scoring import MetricValue, count, predicate_rate
from eval_pipeline.tables import CASE_PREDICATES, TURN_PREDICATES, lane_columns

FluencyPredicate = Literal[
    "no_placeholder",
    "no_provenance_only",
    "complete_punctuation",
    "finite_predicate_shape",
    "no_dotted_inventory",
    "surface_provenance_match",
]
PREDICATES: tuple[str, ...] = FluencyPredicate.__args__  # type: ignore[attr-defined]
# The seed's predicate table says `no_dotted_domain_inventory`; its case schema and metric
# say `no_dotted_inventory`. One name is canonical; the other is accepted in case files.
ALIASES = {"no_dotted_domain_inventory": "no_dotted_inventory"}
EXPECTED = "expected_predicates"
POST_GLOSS = "post_gloss_predicates"


def _canonical(names: Any) -> Any:
    if isinstance(names, list):
        return [ALIASES.get(n, n) if isinstance(n, str) else n for n in names]
    return names


class FluencyCase(BaseModel):
    """One fluency case: a prompt (after optional setup turns) and the predicates it must satisfy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    prompt: str = Field(min_length=1)
    category: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    setup: list[str] = Field(
        default_factory=list, description="Prompts sent first in the same session (e.g. teaching)."
    )
    expected_predicates: list[FluencyPredicate] = Field(min_length=1)
    post_gloss_predicates: list[FluencyPredicate] = Field(default_factory=list)

    _aliases = field_validator("expected_predicates", "post_gloss_predicates", mode="before")(
        classmethod(lambda cls, v: _canonical(v))
    )


def _severity(case: FluencyCase, predicate: str) -> str:
    if predicate in case.expected_predicates:
        return "hard"
    return "report"


@register_lane_kind
class DeterministicFluency:
    name: ClassVar[str] = "deterministic_fluency"
    case_model: ClassVar[type[BaseModel]] = FluencyCase
    metric_names: ClassVar[tuple[str, ...]] = (
        *(f"{p}_rate" for p in PREDICATES),
        "expected_predicates_pass_rate",
        "post_gloss_predicates_pass_rate",
        "cases",
    )

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        return [scripted_thread(case.id, case.setup, case.prompt, scored_role="turn") for case in cases]

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """The six predicates on each case's scored turn (setup turns are not scored)."""
        rows = [
            turn_row(
                record["case_id"],
                int(record["turn_index"]),
                p,
                get_turn_predicate(p)(TurnView.from_row(record)),
            )
            for record in transcripts[transcripts["role"] == "turn"].to_dict("records")
            for p in PREDICATES
        ]
        return pd.DataFrame(rows, columns=lane_columns(TURN_PREDICATES))

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        """Each predicate's verdict per case, plus whether the case's own contracts hold.

        A case with no scored turn fails every predicate (``no_scored_turn``). A predicate
        that does not apply (null) does not break a case's contract: there was nothing to check.
        """
        by_key = {(r["case_id"], r["predicate"]): r for r in turn_predicates.to_dict("records")}
        rows: list[dict[str, Any]] = []
        for case in cases:
            verdicts = {
                p: stored_verdict(by_key.get((case.id, p)), missing_code="no_scored_turn") for p in PREDICATES
            }
            rows.extend(
                case_row(case.id, p, v, severity=_severity(case, p), message=reason(p, v))
                for p, v in verdicts.items()
            )
            for contract, names in (
                (EXPECTED, case.expected_predicates),
                (POST_GLOSS, case.post_gloss_predicates),
            ):
                if not names:
                    continue
                failing = [n for n in names if verdicts[n].passed is False]
                verdict = (
                    Verdict.fail("contract_failed", failing=failing) if failing else Verdict.ok(failing=[])
                )
                message = reason(contract, verdict) if failing else "Every listed predicate holds."
                rows.append(
                    case_row(
                        case.id,
                        contract,
                        verdict,
                        severity="hard" if contract == EXPECTED else "report",
                        message=message,
                    )
                )
        return pd.DataFrame(rows, columns=lane_columns(CASE_PREDICATES))

    def metrics(
        self,
        cases: Sequence[Any],
        transcripts: pd.DataFrame,
        turn_predicates: pd.DataFrame,
        case_predicates: pd.DataFrame,
    ) -> list[MetricValue]:
        values = [predicate_rate(f"{p}_rate", case_predicates, p) for p in PREDICATES]
        values.append(predicate_rate("expected_predicates_pass_rate", case_predicates, EXPECTED))
        values.append(predicate_rate("post_gloss_predicates_pass_rate", case_predicates, POST_GLOSS))
        values.append(count("cases", len(cases)))
        return values
