"""i18n_prompt: EvalCase v1 translation cases (seed 004) scored by the deterministic v1 assertions.

Each case is one ``translate`` turn: the request built by :mod:`eval_pipeline.i18n.prompts`
(protocol cases send their batch). The case_predicates table holds exactly the §6
AssertionResult rows; metrics are per-assertion pass rates and hard / report pass rates over
(case, assertion) pairs. An assertion passes for a case when every result row it produced passed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from eval_pipeline.cases import load_cases
from eval_pipeline.core import TOKEN_LIMIT, with_truncation
from eval_pipeline.i18n import (
    ASSERTION_NAMES,
    AssertionResult,
    Candidate,
    EvalCase,
    check_case,
    error_results,
)
from eval_pipeline.i18n.prompts import FewShotPool, LockedSplitError, compose_prompt
from eval_pipeline.i18n.protocol import decode_batch, expected_item_count
from eval_pipeline.lanes.kind import LANE_KINDS, Scored, Thread, TurnRequest, turns_of_threads
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics import MetricValue, count, rate
from eval_pipeline.predicates.rows import evidence_json
from eval_pipeline.tables import CASE_PREDICATES, TURN_PREDICATES, kind_columns

EXAMPLE_SPLIT = "dev"  # few-shot examples come from this split only (never a locked one)
FEW_SHOT_EXAMPLES = 2


def candidate_from_turn(case: EvalCase, turn: Mapping[Any, Any]) -> Candidate:
    """The §5 candidate a transcript turn holds.

    A replayed candidate file carries ``raw_response`` in ``raw`` and the decoded ``text`` as
    the surface. A live runtime's reply to a batch is the raw protocol response; its decoded
    text is the item texts, one per line. Any other reply is the translation itself.
    """
    surface = "" if pd.isna(turn.get("surface")) else str(turn["surface"])
    raw_text = turn.get("raw")
    raw = json.loads(raw_text) if isinstance(raw_text, str) and raw_text else {}
    if "raw_response" in raw:
        return Candidate(case_id=case.id, text=surface, raw_response=raw["raw_response"])
    protocol = case.protocol
    if protocol is not None:
        text = decode_batch(surface, expected_item_count(case, protocol), protocol.params.terminator)
        return Candidate(case_id=case.id, text=text, raw_response=surface)
    return Candidate(case_id=case.id, text=surface)


def assertion_results(cases: Sequence[EvalCase], transcripts: pd.DataFrame) -> list[AssertionResult]:
    turns = {str(r["case_id"]): r for r in transcripts[transcripts["role"] == "translate"].to_dict("records")}
    results: list[AssertionResult] = []
    for case in cases:
        turn = turns.get(case.id)
        if turn is None:
            results.extend(error_results(case, "no translate turn was recorded"))
        elif not pd.isna(turn.get("error")):
            results.extend(error_results(case, str(turn["error"])))
        else:
            cut = turn.get("finish_reason")
            results.extend(
                result
                if result.passed or cut != TOKEN_LIMIT
                else result.model_copy(
                    update={
                        "message": with_truncation(result.message, cut),
                        "evidence": {**result.evidence, "finish_reason": cut},
                    }
                )
                for result in check_case(case, candidate_from_turn(case, turn))
            )
    return results


def few_shot_pool(spec: LaneSpec, split: str) -> FewShotPool:
    """The pool of a lane split's cases: refused for a locked split or one listing a locked file."""
    if split in spec.locked_splits:
        raise LockedSplitError(f"split {split!r} of lane {spec.name!r} is locked: it never feeds prompts")
    locked_paths = list(dict.fromkeys(path for s in spec.locked_splits for path in spec.case_files(s)))
    locked_files = {path.resolve() for path in locked_paths}
    files = spec.case_files(split)
    shared = [str(p) for p in files if p.resolve() in locked_files]
    if shared:
        raise LockedSplitError(f"split {split!r} lists files of a locked split: {shared}")
    return FewShotPool(load_cases(files, EvalCase), load_cases(locked_paths, EvalCase), split=split)


@LANE_KINDS.register("i18n_prompt")
class I18nPrompt:
    case_model: ClassVar[type[BaseModel]] = EvalCase
    metric_names: ClassVar[tuple[str, ...]] = (
        *(f"{a}_pass_rate" for a in ASSERTION_NAMES),
        "hard_pass_rate",
        "report_pass_rate",
        "cases",
    )
    # A (case, assertion) pair passes when every row it produced passes; hard and report rates
    # count the pairs of that severity, so a case holds several of their verdicts.
    metric_rows: ClassVar[dict[str, MetricRows]] = {
        **{f"{a}_pass_rate": MetricRows(frozenset({a})) for a in ASSERTION_NAMES},
        "hard_pass_rate": MetricRows(None, severity="hard"),
        "report_pass_rate": MetricRows(None, severity="report"),
    }

    def threads(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[Thread]:
        pool = (
            few_shot_pool(spec, EXAMPLE_SPLIT)
            if EXAMPLE_SPLIT in spec.splits and EXAMPLE_SPLIT not in spec.locked_splits
            else None
        )
        return [
            Thread(
                case_id=case.id,
                turns=(
                    TurnRequest(
                        turn_index=0,
                        role="translate",
                        prompt=compose_prompt(case, pool, examples=FEW_SHOT_EXAMPLES),
                    ),
                ),
            )
            for case in cases
        ]

    def turn_table(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> pa.Table | None:
        """None: each prompt is composed with its few-shot examples, so the table is read off
        :meth:`threads`."""
        return None

    def turns_per_case(self, cases: Sequence[Any], spec: LaneSpec, split: str) -> list[int]:
        return turns_of_threads(cases, self.threads(cases, spec, split))  # composing checks each prompt

    def turn_predicates(self, cases: Sequence[Any], transcripts: pd.DataFrame) -> pd.DataFrame:
        """Nothing is scored per turn: every verdict of this lane is a case-level assertion."""
        return pd.DataFrame(columns=kind_columns(TURN_PREDICATES))

    def case_predicates(
        self, cases: Sequence[Any], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
    ) -> pd.DataFrame:
        rows = [
            {
                "case_id": r.case_id,
                "predicate": r.assertion,
                "passed": r.passed,
                "severity": r.severity,
                "code": r.code,
                "message": r.message,
                "evidence": evidence_json(r.evidence),
            }
            for r in assertion_results(cases, transcripts)
        ]
        return pd.DataFrame(rows, columns=kind_columns(CASE_PREDICATES))

    def metrics(self, scored: Scored) -> list[MetricValue]:
        # (case, assertion) → passed when every row it produced passed; severity per pair.
        verdicts: dict[tuple[str, str], bool] = defaultdict(lambda: True)
        severity: dict[tuple[str, str], str] = {}
        for row in scored.case_predicates.to_dict("records"):
            key = (str(row["case_id"]), str(row["predicate"]))
            verdicts[key] = verdicts[key] and bool(row["passed"])
            severity[key] = str(row["severity"])
        values = [
            rate(f"{name}_pass_rate", [(c, v) for (c, a), v in verdicts.items() if a == name])
            for name in ASSERTION_NAMES
        ]
        for level in ("hard", "report"):
            values.append(
                rate(
                    f"{level}_pass_rate",
                    [(c, v) for k, v in verdicts.items() if severity[k] == level for c in [k[0]]],
                )
            )
        values.append(count("cases", len(scored.cases)))
        return values

    def derive_metrics(self, values: Sequence[MetricValue]) -> list[MetricValue]:
        """Nothing to derive: every metric here is a rate or a count, which add up over batches."""
        return list(values)
