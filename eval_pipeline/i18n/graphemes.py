"""User-perceived characters: a simplified extended grapheme cluster segmentation (UAX #29).

Implemented rules: CR LF stays together (GB3); controls stand alone (GB4/5); Hangul jamo
sequences and syllables join (GB6-8); combining marks (Mn, Me, Mc), ZWNJ/ZWJ, variation
selectors, emoji modifiers and tag characters extend the previous cluster (GB9/9a); an
emoji ZWJ emoji sequence is one cluster (GB11); regional indicators pair into flags (GB12/13).
Limits: no Prepend (GB9b) and no Indic conjunct rule (GB9c), so a Devanagari conjunct such as
"क्ष" counts as two; "extended pictographic" is approximated by the emoji blocks and
category So. Text in those scripts may count a little high, never low.
"""

from __future__ import annotations

import unicodedata

_ZWJ = 0x200D


def _is_extend(cp: int) -> bool:
    return (
        unicodedata.category(chr(cp)) in {"Mn", "Me", "Mc"}
        or cp in {0x200C, _ZWJ}
        or 0x1F3FB <= cp <= 0x1F3FF
        or 0xE0020 <= cp <= 0xE007F
    )


def _is_control(cp: int) -> bool:
    return unicodedata.category(chr(cp)) in {"Cc", "Zl", "Zp"} or cp in {0x0D, 0x0A}


def _is_regional_indicator(cp: int) -> bool:
    return 0x1F1E6 <= cp <= 0x1F1FF


def _is_pictographic(cp: int) -> bool:
    return 0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or unicodedata.category(chr(cp)) == "So"


def _hangul(cp: int) -> str:
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


_HANGUL_JOINS = {
    ("L", "L"),
    ("L", "V"),
    ("L", "LV"),
    ("L", "LVT"),
    ("LV", "V"),
    ("LV", "T"),
    ("V", "V"),
    ("V", "T"),
    ("LVT", "T"),
    ("T", "T"),
}


def _joins(cluster: list[int], nxt: int, regional_run: int) -> bool:
    prev = cluster[-1]
    if prev == 0x0D and nxt == 0x0A:
        return True
    if _is_control(prev) or _is_control(nxt):
        return False
    if (_hangul(prev), _hangul(nxt)) in _HANGUL_JOINS:
        return True
    if _is_extend(nxt):
        return True
    if prev == _ZWJ and _is_pictographic(nxt) and any(_is_pictographic(c) for c in cluster):
        return True
    return _is_regional_indicator(prev) and _is_regional_indicator(nxt) and regional_run % 2 == 1


def graphemes(text: str) -> list[str]:
    """``text`` split into user-perceived characters."""
    clusters: list[list[int]] = []
    regional_run = 0
    for ch in text:
        cp = ord(ch)
        if clusters and _joins(clusters[-1], cp, regional_run):
            clusters[-1].append(cp)
        else:
            clusters.append([cp])
        regional_run = regional_run + 1 if _is_regional_indicator(cp) else 0
    return ["".join(map(chr, cluster)) for cluster in clusters]


def grapheme_count(text: str) -> int:
    return len(graphemes(text))
