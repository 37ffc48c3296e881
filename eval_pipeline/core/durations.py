"""Durations as people read them: ``850 ms``, ``28.5 s``, ``2 min 05 s``, never ``2.848e+04 ms``."""

from __future__ import annotations

import math

MS_PER_S = 1000.0
S_PER_MIN = 60
S_PER_H = 3600


def duration_text(ms: float | None) -> str:
    """``ms`` milliseconds in the largest unit that keeps it readable: below a second in
    milliseconds (``850 ms``, ``3.2 ms``, ``0.41 ms``), below a minute in seconds with one
    decimal (``28.5 s``), then minutes and seconds (``2 min 05 s``), then hours and minutes
    (``1 h 02 min``). ``n/a`` for None, NaN or an infinity."""
    if ms is None or not math.isfinite(ms):
        return "n/a"
    if ms < 0:
        return "-" + duration_text(-ms)
    if ms < 1.0:
        return f"{ms:.2f} ms"
    if ms < 10.0:
        return f"{ms:.1f} ms"
    if round(ms) < MS_PER_S:
        return f"{ms:.0f} ms"
    seconds = ms / MS_PER_S
    if round(seconds, 1) < S_PER_MIN:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < S_PER_H:
        return f"{whole // S_PER_MIN} min {whole % S_PER_MIN:02d} s"
    minutes = round(seconds / S_PER_MIN)
    return f"{minutes // 60} h {minutes % 60:02d} min"
