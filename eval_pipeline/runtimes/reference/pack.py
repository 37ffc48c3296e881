"""The concept pack the reference runtime answers from: lemmas, domain paths, glosses."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field


class Concept(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: tuple[str, ...] = Field(min_length=1)
    gloss: str | None = None


class ConceptPack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pack_id: str
    concepts: dict[str, Concept]

    def lookup(self, word: str) -> str | None:
        """The pack lemma for ``word`` (case-insensitive; a plain plural maps to its singular)."""
        word = word.strip().lower()
        if word in self.concepts:
            return word
        for suffix in ("es", "s"):
            if word.endswith(suffix) and word[: -len(suffix)] in self.concepts:
                return word[: -len(suffix)]
        return None


@cache
def default_pack() -> ConceptPack:
    text = resources.files("eval_pipeline.runtimes.reference").joinpath("pack.json").read_text("utf-8")
    return ConceptPack.model_validate(json.loads(text))
