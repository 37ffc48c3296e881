"""Durations as a person reads them: ``850 ms``, ``28.5 s``, ``4 min 12 s``, ``1 h 5 min``."""

from __future__ import annotations

import math

MS_PER_S = 1000.0
S_PER_MIN = 60
S_PER_H = 3600


def format_duration(ms: float) -> str:
    """``ms`` milliseconds in the largest unit that keeps them readable: under a second in
    milliseconds (three significant figures), under a minute in seconds to one decimal, then
    minutes and seconds, then hours and minutes. Never in exponent form."""
    if not math.isfinite(ms) or ms < 0:
        return f"{ms:g} ms"
    if ms == 0:
        return "0 ms"
    shown = float(f"{ms:.3g}")  # three significant figures, decided before the unit is
    if shown < MS_PER_S:
        return f"{shown:f}".rstrip("0").rstrip(".") + " ms"
    seconds = round(ms / MS_PER_S, 1)
    if seconds < S_PER_MIN:
        return f"{seconds:.1f} s"
    whole = round(ms / MS_PER_S)
    if whole < S_PER_H:
        minutes, rest = divmod(whole, S_PER_MIN)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(round(whole / S_PER_MIN), S_PER_MIN)
    return f"{hours} h {rest} min" if rest else f"{hours} h"
