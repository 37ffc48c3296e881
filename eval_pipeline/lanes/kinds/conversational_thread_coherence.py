"""conversational_thread_coherence: grounding and topic continuity over 8–12 turn threads (seed 003).

Every turn is scored with four turn predicates; each case with two thread-level ones
(topic anchoring of anaphoric follow-ups, no drift to ``none`` on replayed prompt-subjects).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval_pipeline.lanes.kind import Thread, TurnRequest, register_lane_kind
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.predicates import TurnView, Verdict, get_turn_predicate
from eval_pipeline.predicates.explain import reason
from eval_pipeline.predicates.rows import case_row, turn_row
from eval_pipeline.predicates.thread import ThreadTurnView, no_topic_drift_to_none, topic_anchor_present
from eval_pipeline.scoring import MetricValue, count, predicate_rate
from eval_pipeline.tables import CASE_PREDICATES, TURN_PREDICATES, lane_columns

MIN_TURNS = 8
MAX_TURNS = 12
TURN_PREDICATE_NAMES: tuple[str, ...] = (
    "no_placeholder",
    "is_grounded",
    "not_walk_fragment",
    "length_adequate",
)
CASE_PREDICATE_FUNCTIONS = {
    "topic_anchor_present": topic_anchor_present,
    "no_topic_drift_to_none": no_topic_drift_to_none,
}
_LEMMA = r"^[a-z][a-z\- ]*[a-z]$"


class ThreadTurn(BaseModel):
    """One prompt of a thread and what the predicates need to know about it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: str = Field(min_length=1)
    subject_lemma: str | None = Field(default=None, pattern=_LEMMA, description="What the prompt is about.")
    expects_grounded: bool = Field(default=True, description="Whether is_grounded applies to this turn.")
    anaphora_anchor_to: str | None = Field(
        default=None,
        pattern=_LEMMA,
        description="For an anaphoric follow-up: the earlier subject lemma it must resolve to.",
    )
    is_replay_of_prompt_at_turn: int | None = Field(
        default=None, ge=0, description="This turn re-asks the prompt-subject of that earlier turn."
    )


class ThreadCase(BaseModel):
    """A thread of 8 to 12 turns sent in one session."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    description: str = ""
    turns: list[ThreadTurn] = Field(min_length=MIN_TURNS, max_length=MAX_TURNS)

    @field_validator("turns")
    @classmethod
    def _annotations_point_backwards(cls, turns: list[ThreadTurn]) -> list[ThreadTurn]:
        problems: list[str] = []
        for index, turn in enumerate(turns):
            earlier = turns[:index]
            anchor = turn.anaphora_anchor_to
            if anchor is not None:
                if anchor not in {t.subject_lemma for t in earlier}:
                    problems.append(
                        f"turns[{index}].anaphora_anchor_to: {anchor!r} is not the subject_lemma of an earlier turn"
                    )
                if turn.subject_lemma is not None and turn.subject_lemma != anchor:
                    problems.append(
                        f"turns[{index}].subject_lemma: {turn.subject_lemma!r} differs from its anchor {anchor!r}"
                    )
            origin = turn.is_replay_of_prompt_at_turn
            if origin is not None:
                if origin >= index:
                    problems.append(
                        f"turns[{index}].is_replay_of_prompt_at_turn: {origin} is not an earlier turn (expected 0..{index - 1})"
                    )
                    continue
                source = turns[origin]
                if source.is_replay_of_prompt_at_turn is not None:
                    problems.append(
                        f"turns[{index}].is_replay_of_prompt_at_turn: turn {origin} is itself a replay; "
                        f"point at the original turn {source.is_replay_of_prompt_at_turn}"
                    )
                if source.subject_lemma != turn.subject_lemma:
                    problems.append(
                        f"turns[{index}].subject_lemma: a replay must share turn {origin}'s subject_lemma "
                        f"({source.subject_lemma!r}), got {turn.subject_lemma!r}"
                    )
        if problems:
            raise ValueError("; ".join(problems))
        return turns


@register_lane_kind
class ConversationalThreadCoherence:
    name: ClassVar[str] = "conversational_thread_coherence"
    case_model: ClassVar[type[BaseModel]] = ThreadCase
    metric_names: ClassVar[tuple[str, ...]] = (
        "per_turn_grounded_rate",
        "per_turn_not_fragment_rate",
        "case_topic_anchor_rate",
        "case_no_drift_rate",
        "no_placeholder_rate",
        "length_adequate_rate",
        "cases",
        "turns",
    )

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        return [
            Thread(
                case_id=case.id,
                turns=tuple(
                    TurnRequest(turn_index=i, role="turn", prompt=turn.prompt)
                    for i, turn in enumerate(case.turns)
                ),
            )
            for case in cases
        ]

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """Four predicates on every turn; is_grounded is null where the case does not expect grounding."""
        by_id = {case.id: case for case in cases}
        rows: list[dict[str, Any]] = []
        for record in transcripts.to_dict("records"):
            annotation = by_id[record["case_id"]].turns[int(record["turn_index"])]
            turn = TurnView.from_row(record)
            for predicate in TURN_PREDICATE_NAMES:
                if predicate == "is_grounded" and not annotation.expects_grounded:
                    verdict = Verdict.not_applicable("not_expected_to_ground")
                else:
                    verdict = get_turn_predicate(predicate)(turn)
                rows.append(turn_row(record["case_id"], int(record["turn_index"]), predicate, verdict))
        return pd.DataFrame(rows, columns=lane_columns(TURN_PREDICATES))

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        """topic_anchor_present and no_topic_drift_to_none per case (null where not applicable)."""
        recorded = {(r["case_id"], int(r["turn_index"])): r for r in transcripts.to_dict("records")}
        rows: list[dict[str, Any]] = []
        for case in cases:
            views = [
                ThreadTurnView(
                    turn_index=index,
                    turn=_recorded_turn(recorded.get((case.id, index))),
                    anaphora_anchor_to=annotation.anaphora_anchor_to,
                    is_replay_of_prompt_at_turn=annotation.is_replay_of_prompt_at_turn,
                )
                for index, annotation in enumerate(case.turns)
            ]
            for predicate, check in CASE_PREDICATE_FUNCTIONS.items():
                verdict = check(views)
                rows.append(
                    case_row(
                        case.id, predicate, verdict, severity="report", message=reason(predicate, verdict)
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
        return [
            predicate_rate("per_turn_grounded_rate", turn_predicates, "is_grounded"),
            predicate_rate("per_turn_not_fragment_rate", turn_predicates, "not_walk_fragment"),
            predicate_rate("case_topic_anchor_rate", case_predicates, "topic_anchor_present"),
            predicate_rate("case_no_drift_rate", case_predicates, "no_topic_drift_to_none"),
            predicate_rate("no_placeholder_rate", turn_predicates, "no_placeholder"),
            predicate_rate("length_adequate_rate", turn_predicates, "length_adequate"),
            count("cases", len(cases)),
            count("turns", sum(len(case.turns) for case in cases)),
        ]


def _recorded_turn(record: Mapping[Any, Any] | None) -> TurnView:
    """The recorded turn, or a faulted stand-in when the transcripts lack it."""
    if record is None:
        return TurnView(surface="", error="turn missing from transcripts")
    return TurnView.from_row(record)
