"""Repeated samples of a case: seeds, per-sample scoring, pooled metrics, pass@k and pass^k.

A run with ``repeat`` N sends every case N times, each in a fresh session; every row of its
transcripts and predicate tables carries its ``sample_index``. Each sample is scored on its
own by the lane's kind, exactly as a run of one sample is, so lane kinds never see repeats;
the metrics are then pooled over the samples (numerators and denominators add up), and
``all_samples`` tables (a verdict passes only when it passes in every sample) give pass^k.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from math import comb

import pandas as pd

from eval_pipeline.metrics.flips import flips_by_group
from eval_pipeline.metrics.scoring import MetricValue, counts_added, failing_cases_of
from eval_pipeline.tables import StageFile

SAMPLE_INDEX = "sample_index"
SEED_BITS = 31  # fits every runtime's seed parameter (OpenAI's is a signed 64-bit, some take 32)

CASE_SAMPLE_COLUMNS = [
    "case_id",
    "predicate",
    "samples",
    "passes",
    "pass_rate",
    "pass_at_k",
    "pass_hat_k",
    "flips",
]


def derive_seed(run_seed: int, session_key: str, sample_index: int) -> int:
    """The seed of one sample: a stable hash of (run seed, case or session, sample index)."""
    digest = hashlib.sha256(f"{run_seed}\x1f{session_key}\x1f{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def sample_count(table: pd.DataFrame) -> int:
    """How many samples per case ``table`` holds: its largest sample index plus one, as
    :func:`samples_in` counts a stage file (one without the column, or with it null: older runs)."""
    largest = table[SAMPLE_INDEX].max() if SAMPLE_INDEX in table.columns else None
    return 1 if largest is None or pd.isna(largest) else int(largest) + 1


def sample_frames(table: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    """``table``'s rows per sample, in sample order (a table without the column is sample 0)."""
    if SAMPLE_INDEX not in table.columns or table.empty:
        return [(0, table)]
    indexes = table[SAMPLE_INDEX].fillna(0).astype(int)
    if indexes.nunique() <= 1:
        return [(int(indexes.iloc[0]), table)]
    return [(int(i), table[indexes == i].reset_index(drop=True)) for i in sorted(indexes.unique())]


def per_sample(
    transcripts: pd.DataFrame,
    score: Callable[[pd.DataFrame, int], pd.DataFrame],
    columns: Sequence[str],
) -> pd.DataFrame:
    """``score(transcripts of one sample, its index)`` for every sample, tagged and concatenated."""
    parts = [score(rows, index).assign(**{SAMPLE_INDEX: index}) for index, rows in sample_frames(transcripts)]
    table = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    table[SAMPLE_INDEX] = table[SAMPLE_INDEX].astype("Int64")
    return table[list(columns)]


def rows_of_sample(table: pd.DataFrame, index: int) -> pd.DataFrame:
    """The rows of one sample (all rows for a table without samples)."""
    if SAMPLE_INDEX not in table.columns:
        return table
    if table[SAMPLE_INDEX].nunique() <= 1:
        return table
    return table[table[SAMPLE_INDEX].fillna(0).astype(int) == index].reset_index(drop=True)


def all_samples(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """A predicate table with one row per ``keys`` (and per position among a sample's rows of
    the same keys): passed only when every sample's verdict passed (null when none applied),
    with the first failing sample's code and evidence."""
    if SAMPLE_INDEX not in table.columns or table[SAMPLE_INDEX].nunique() <= 1:
        return table
    columns = list(table.columns)
    key = [*keys, "_position"]
    marked = table.assign(
        _position=table.groupby([*keys, SAMPLE_INDEX], sort=False, dropna=False).cumcount(),
        _failed=table["passed"].eq(False).fillna(False),
    )
    ordered = marked.sort_values(
        [*key, "_failed", SAMPLE_INDEX], ascending=[*([True] * len(key)), False, True], kind="stable"
    )
    first = ordered.drop_duplicates(key).set_index(key)
    verdicts = marked.groupby(key, sort=False, dropna=False)["passed"].agg(_all_pass)
    first["passed"] = pd.array(verdicts.reindex(first.index).tolist(), dtype="boolean")
    return first.reset_index()[columns].reset_index(drop=True)


def _all_pass(verdicts: pd.Series) -> bool | None:
    applicable = verdicts.dropna()
    return None if applicable.empty else bool(applicable.all())


def pool(
    per_sample_values: Sequence[Sequence[MetricValue]], all_samples_values: Sequence[MetricValue]
) -> list[MetricValue]:
    """Metrics pooled over samples: counts add up (a rate's value is the pooled rate), a metric
    without counts is the mean of its values; ``all_samples_values`` (the metrics of the
    all-samples tables) become each metric's pass^k. One sample: its values, unchanged."""
    if len(per_sample_values) == 1:
        return list(per_sample_values[0])
    samples = len(per_sample_values)
    by_name = {m.metric: m.value for m in all_samples_values}
    pooled: list[MetricValue] = []
    for position, first in enumerate(per_sample_values[0]):
        values = [sample[position] for sample in per_sample_values]
        summed = counts_added(values, samples)
        if summed is None:  # a metric without counts is the mean of its values
            known = [m.value for m in values if m.value is not None]
            summed = MetricValue(
                first.metric,
                sum(known) / len(known) if known else None,
                None,
                None,
                failing_cases_of(values),
                samples,
            )
        pooled.append(replace(summed, all_samples_value=by_name.get(first.metric)))
    return pooled


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k samples drawn from n (c of them passing) passes."""
    _check_k(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all k samples drawn from n (c of them passing) pass."""
    _check_k(n, c, k)
    return comb(c, k) / comb(n, k)


def _check_k(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def case_samples(case_predicates: pd.DataFrame, k: int | None = None) -> pd.DataFrame:
    """Per case predicate over the run's samples: how many applied and passed, the pass rate,
    pass@k and pass^k (k: the samples that applied, unless given) and the flips between
    consecutive samples (:func:`eval_pipeline.metrics.flips.flips_by_group`, the one definition)."""
    table = case_predicates
    if SAMPLE_INDEX not in table.columns:
        table = table.assign(**{SAMPLE_INDEX: 0})
    counted = flips_by_group(table, ["case_id", "predicate"], SAMPLE_INDEX)
    if counted.empty:
        return pd.DataFrame(columns=CASE_SAMPLE_COLUMNS)
    n = counted["verdicts"].astype(int)
    c = counted["passes"].astype(int)
    k_used = n if k is None else n.clip(upper=k)
    # pass@k and pass^k of each distinct (n, c, k): few, however many cases
    at_k = {key: (pass_at_k(*key), pass_hat_k(*key)) for key in set(zip(n, c, k_used, strict=True))}
    keys = list(zip(n, c, k_used, strict=True))
    return pd.DataFrame(
        {
            "case_id": counted["case_id"].astype(str),
            "predicate": counted["predicate"].astype(str),
            "samples": n,
            "passes": c,
            "pass_rate": c / n,
            "pass_at_k": [at_k[key][0] for key in keys],
            "pass_hat_k": [at_k[key][1] for key in keys],
            "flips": counted["flips"].astype(int),
        },
        columns=CASE_SAMPLE_COLUMNS,
    )


def samples_in(table: StageFile) -> int:
    """How many samples per case a stage file holds (from its statistics where it has them)."""
    largest = table.column_max(SAMPLE_INDEX)
    return int(largest) + 1 if largest is not None else 1


FLAKY_READS = ("case_id", "predicate", "passed", SAMPLE_INDEX)  # what flaky_within_run reads


def flaky_within_run(batches: Iterable[pd.DataFrame], samples: int) -> pd.DataFrame:
    """Case predicates whose ``samples`` disagree, most flips first, from a run's case predicates
    (columns :data:`FLAKY_READS`) given batch by batch, each case's samples in one batch. Empty
    with one sample, which cannot disagree with itself: ``batches`` is then not read."""
    if samples <= 1:
        return pd.DataFrame(columns=CASE_SAMPLE_COLUMNS)
    summaries = [summary for batch in batches if len(summary := case_samples(batch))]
    if not summaries:
        return pd.DataFrame(columns=CASE_SAMPLE_COLUMNS)
    summary = pd.concat(summaries, ignore_index=True)
    flaky = summary[summary["flips"] > 0]
    return flaky.sort_values(["flips", "case_id", "predicate"], ascending=[False, True, True]).reset_index(
        drop=True
    )
