"""A bot that answers well with a controlled probability: the sampled runs' ground truth.

Each session draws from its own RNG, seeded with the seed the pipeline hands the factory
(derived from the run seed, the case and the sample), so a run with a seed is reproducible;
without one it draws from fresh entropy. A good answer ends with a full stop, a bad one does
not (``complete_punctuation`` fails it).
"""

from __future__ import annotations

import random

GOOD = "The answer holds."
BAD = "The answer holds"


class CoinBot:
    def __init__(self, seed: int | None = None, pass_probability: float = 0.7) -> None:
        self._rng = random.Random(seed)
        self._pass_probability = pass_probability

    def chat(self, prompt: str) -> dict[str, str]:
        surface = GOOD if self._rng.random() < self._pass_probability else BAD
        return {"surface": surface, "grounding_source": "none"}
