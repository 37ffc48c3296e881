"""The concept pack the reference runtime answers from: lemmas, domain paths, glosses."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path

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


def pack_bytes(path: str | None = None) -> bytes:
    """The pack file's bytes: the embedded ``pack.json``, or the file at ``path``."""
    if path:
        return Path(path).read_bytes()
    return resources.files("eval_pipeline.runtimes.reference").joinpath("pack.json").read_bytes()


def pack_sha256(path: str | None = None) -> str:
    """The content hash of a pack file: what identifies the reference runtime's behaviour."""
    return hashlib.sha256(pack_bytes(path)).hexdigest()


@cache
def _parsed_pack(content: bytes) -> ConceptPack:
    return ConceptPack.model_validate(json.loads(content.decode("utf-8")))


def load_pack(path: str | None = None) -> ConceptPack:
    """The pack at ``path`` (the embedded one when None), parsed once per content."""
    return _parsed_pack(pack_bytes(path))


def default_pack() -> ConceptPack:
    return load_pack()
