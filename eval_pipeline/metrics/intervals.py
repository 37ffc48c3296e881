"""Confidence intervals for rates measured on few cases."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054  # two-sided 95%


def wilson_interval(successes: float, trials: float, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval of ``successes / trials``; None when there are no trials.

    Unlike the normal approximation it stays inside [0, 1] and is not zero-width at 0 or 1,
    which matters for lanes of 15 cases where rates of exactly 1.0 are common.
    """
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes {successes} must lie between 0 and trials {trials}")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)
