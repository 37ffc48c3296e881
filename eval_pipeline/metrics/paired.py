"""Paired statistics: is run B's rate different from run A's on the cases both measured?

Pure functions over per-case counts (NumPy arrays, one position per common case). For each
case, each side holds ``counted`` (the verdicts the rate counts: passes for a rate, failures
for a failure rate) out of ``applicable`` verdicts: 0 or 1 with one sample of a case-level
rate, up to N with N samples, up to the case's turns for a rate over turns. A side's rate is
``sum(counted) / sum(applicable)``, as the metrics stage pools it.

- **McNemar (exact).** When every case holds one verdict on each side, the 2×2 table of
  (A counted, B counted) decides: only the discordant cases (counted on one side only) carry
  information, and under "no difference" each is as likely one way as the other, so the
  two-sided p-value is the binomial tail ``min(1, 2 · P(X ≤ min(only_a, only_b)))`` with
  ``X ~ Binomial(only_a + only_b, 1/2)`` (1.0 with no discordant case). With several
  verdicts per case (samples, turns) they are not independent and McNemar does not apply.
- **Paired bootstrap, clustered.** Whole cases are resampled with replacement, both sides of a
  case together, so samples and turns of one case are never treated as independent. Cases
  with the same four counts are interchangeable, so a resample is a multinomial draw of how
  many cases of each distinct kind it holds: exactly the case resampling, at the cost of the
  distinct kinds rather than the cases. The 95% interval is the percentile interval of
  ``rate_b − rate_a`` over :data:`RESAMPLES` resamples from a fixed seed (reproducible).
  Where McNemar does not apply (clustered), the same resamples give the p-value: two-sided,
  ``min(1, 2 · (k + 1) / (R + 1))`` with ``k`` the smaller of the numbers of resamples with
  ``Δ* ≤ 0`` and with ``Δ* ≥ 0``, and ``R`` the resamples; one-sided "B is worse",
  ``(k + 1) / (R + 1)`` with ``k`` the resamples where B is no worse. The ``+ 1`` keeps a
  p-value from a finite number of resamples above 0 (at least ``1 / (R + 1)``). It is the
  p-value the percentile interval inverts: it is below 0.05 about when the 95% interval
  excludes 0, and it lets a clustered metric take part in Holm's correction.
- **Holm.** Across one lane's metrics, :func:`holm` adjusts the p-values step-down, so the
  chance of calling any "no difference" metric different stays within α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

ALPHA = 0.05
RESAMPLES = 10_000
SEED = 20261201  # a fixed seed: the same runs give the same interval every time
_NEGLIGIBLE_BITS = 64  # a binomial term below 2^-64 of the sum so far ends the sum

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PairedCounts:
    """The 2×2 table of one-verdict-per-case data: in how many common cases each side counted."""

    both: int
    only_a: int
    only_b: int
    neither: int

    @property
    def cases(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither


@dataclass(frozen=True)
class PairedFigures:
    """What the paired test says about one rate: its value on each side (on the common cases),
    the delta ``b − a``, the bootstrap interval of the delta, the 2×2 counts when McNemar
    applies, and the two-sided p-value: McNemar's exact one, else the clustered bootstrap's."""

    cases: int
    verdicts_a: int  # the verdicts each side's rate pools on the common cases (samples, turns)
    verdicts_b: int
    rate_a: float
    rate_b: float
    delta: float
    ci_low: float
    ci_high: float
    counts: PairedCounts | None  # None: several verdicts per case (clustered), McNemar does not apply
    p_value: float
    resamples: int
    seed: int

    @property
    def clustered(self) -> bool:
        return self.counts is None


def binomial_lower_tail(k: int, n: int) -> float:
    """``P(X ≤ k)`` for ``X ~ Binomial(n, 1/2)``, in integers: ``Σ C(n, i) / 2^n``, summed from
    ``i = k`` down until a term no longer moves the sum's first 64 bits (the terms fall
    geometrically below the middle), then divided once, correctly rounded. Above the middle,
    by symmetry, ``1 − P(X ≤ n − k − 1)``."""
    if n < 0 or k < 0:
        raise ValueError(f"a binomial tail needs 0 <= k and 0 <= n, got k={k}, n={n}")
    if k >= n:
        return 1.0
    if 2 * k >= n:
        return 1.0 - binomial_lower_tail(n - k - 1, n)
    term = math.comb(n, k)
    total = term
    for i in range(k, 0, -1):
        term = term * i // (n - i + 1)  # C(n, i - 1), exactly
        total += term
        if term <= total >> _NEGLIGIBLE_BITS:
            break
    return total / (1 << n)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """The two-sided exact McNemar p-value from the discordant counts (1.0 when there are none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_lower_tail(min(only_a, only_b), n))


def mcnemar_one_sided(worse: int, better: int) -> float:
    """The one-sided exact p-value that B is worse: ``P(X ≥ worse)``, ``X ~ Binomial(worse + better, 1/2)``,
    where ``worse`` cases went the bad way and ``better`` the good way."""
    return binomial_lower_tail(better, worse + better)


def paired_counts(counted_a: npt.ArrayLike, counted_b: npt.ArrayLike) -> PairedCounts:
    """The 2×2 table of two boolean arrays, one position per case."""
    a, b = np.asarray(counted_a, dtype=bool), np.asarray(counted_b, dtype=bool)
    both = int((a & b).sum())
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    return PairedCounts(both, only_a, only_b, len(a) - both - only_a - only_b)


def paired_figures(
    counted_a: npt.ArrayLike,
    applicable_a: npt.ArrayLike,
    counted_b: npt.ArrayLike,
    applicable_b: npt.ArrayLike,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
) -> PairedFigures | None:
    """The paired figures of one rate over the cases applicable on both sides (None when there
    is none). Inputs are per-case counts, one position per common case (module docstring)."""
    ca, na, cb, nb = (
        np.asarray(x, dtype=np.int64) for x in (counted_a, applicable_a, counted_b, applicable_b)
    )
    if not (len(ca) == len(na) == len(cb) == len(nb)):
        raise ValueError("per-case counts of both sides must have one position per case")
    if ((ca < 0) | (ca > na) | (cb < 0) | (cb > nb)).any():
        raise ValueError("a case cannot count more verdicts than it has applicable, nor fewer than none")
    both = (na > 0) & (nb > 0)
    ca, na, cb, nb = ca[both], na[both], cb[both], nb[both]
    if not len(ca):
        return None
    rate_a, rate_b = ca.sum() / na.sum(), cb.sum() / nb.sum()
    deltas = bootstrap_deltas(ca, na, cb, nb, resamples=resamples, seed=seed)
    low, high = percentile_interval(deltas, level)
    single = bool((na == 1).all() and (nb == 1).all())
    counts = paired_counts(ca == 1, cb == 1) if single else None
    p_value = mcnemar_exact(counts.only_a, counts.only_b) if counts else bootstrap_p_value(deltas)
    return PairedFigures(
        len(ca),
        int(na.sum()),
        int(nb.sum()),
        float(rate_a),
        float(rate_b),
        float(rate_b - rate_a),
        low,
        high,
        counts,
        p_value,
        resamples,
        seed,
    )


def bootstrap_deltas(
    counted_a: IntArray,
    applicable_a: IntArray,
    counted_b: IntArray,
    applicable_b: IntArray,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> npt.NDArray[np.float64]:
    """``rate_b − rate_a`` of ``resamples`` case resamples (every case applicable on both sides)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    kinds, weight = np.unique(
        np.stack([counted_a, applicable_a, counted_b, applicable_b], axis=1), axis=0, return_counts=True
    )
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(int(weight.sum()), weight / weight.sum(), size=resamples).astype(np.float64)
    sums = drawn @ kinds.astype(np.float64)  # per resample: counted_a, applicable_a, counted_b, applicable_b
    return sums[:, 2] / sums[:, 3] - sums[:, 0] / sums[:, 1]


def percentile_interval(deltas: npt.NDArray[np.float64], level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap deltas at ``level``."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(deltas, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_p_value(deltas: npt.NDArray[np.float64]) -> float:
    """The two-sided bootstrap p-value of "no difference" from resampled deltas (module docstring)."""
    tail = min(int((deltas <= 0).sum()), int((deltas >= 0).sum()))
    return min(1.0, 2.0 * (tail + 1) / (len(deltas) + 1))


def bootstrap_worse_p_value(deltas: npt.NDArray[np.float64], *, higher_is_better: bool) -> float:
    """The one-sided bootstrap p-value that B is worse: the share of resamples in which B is no
    worse (``Δ* ≥ 0`` for a higher-is-better rate, ``Δ* ≤ 0`` otherwise), ``+ 1`` over ``R + 1``."""
    no_worse = int((deltas >= 0).sum()) if higher_is_better else int((deltas <= 0).sum())
    return (no_worse + 1) / (len(deltas) + 1)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the given order (None stays None and is not counted)."""
    present = [(p, i) for i, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    m, running = len(present), 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def verdict_words(
    figures: PairedFigures | None,
    adjusted_p: float | None,
    *,
    higher_is_better: bool,
    alpha: float = ALPHA,
) -> str:
    """``B better``, ``B worse`` or ``no detectable difference at α = 0.05, n = 15``.

    The Holm-adjusted p-value decides (McNemar's, or the clustered bootstrap's); without one
    (a metric left out of the correction) the raw p-value does."""
    if figures is None:
        return "not compared: no case applicable on both sides"
    p = figures.p_value if adjusted_p is None else adjusted_p
    if not (p < alpha and figures.delta != 0):
        return f"no detectable difference at α = {alpha:g}, n = {figures.cases}"
    return "B better" if (figures.delta > 0) == higher_is_better else "B worse"
