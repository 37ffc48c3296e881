"""Prompt composition for translation cases, and the request format runtimes read back.

Locked cases never reach prompt material: few-shot examples come only from a
:class:`FewShotPool`, which refuses any example that is, by id or text, a locked case (the
i18n lane kind builds it only from a split that is not locked and whose files no locked split
lists). A case
under evaluation (locked or not) appears only in its own request.

A request is a marker line and one JSON header line (locales, placeholder syntax, tokens to
keep, batch size and terminator: what a runtime reads back), then what a chat model follows:
plain instructions naming both languages, what to copy unchanged and to reply with only the
translation; optional examples; the text in a ``<source>`` block (a batch's holds its numbered
items); and a last line ``Translation:`` to answer after.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence

from babel import Locale, UnknownLocaleError
from pydantic import BaseModel, ConfigDict

from eval_pipeline.cases import LoadedCase
from eval_pipeline.i18n.case import EvalCase, required_token_list
from eval_pipeline.i18n.params import RequiredTokens
from eval_pipeline.i18n.placeholder_integrity import effective_syntax
from eval_pipeline.i18n.placeholders import PlaceholderSyntaxError, flat_tokenizer
from eval_pipeline.i18n.protocol import parse_batch, render_batch

REQUEST_MARK = "### translation request (EvalCase v1)"
_OPEN, _CLOSE = "<source>", "</source>"
EXAMPLE_MARK = "Example:"  # the line that opens a few-shot example


class LockedSplitError(ValueError):
    """Prompt material was asked for from a locked split."""


class FewShotExample(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    translation: str


class TranslationRequest(BaseModel):
    """What a translation prompt asks for; runtimes can read it back with :func:`parse_request`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_locale: str
    target_locale: str
    syntax: str
    keep: tuple[str, ...] = ()
    items: tuple[str, ...]
    batch: bool = False
    terminator: str | None = None
    examples: tuple[FewShotExample, ...] = ()


def text_hash(text: str) -> str:
    """A hash of what a text says: NFC-normalised, surrounding whitespace ignored."""
    return hashlib.sha256(unicodedata.normalize("NFC", text).strip().encode("utf-8")).hexdigest()


def _case_texts(case: EvalCase) -> list[str]:
    return [case.source, *case.references]


class FewShotPool:
    """Few-shot examples drawn from example cases, never from locked ones.

    The caller reads the cases (an unlocked split's files, and every locked split's). Paths are
    not enough to keep locked cases out (a hard link or a copy has another path), so the pool
    refuses any example whose id, source or reference is, by content, a locked case's.
    """

    def __init__(
        self,
        examples: Sequence[LoadedCase[EvalCase]],
        locked: Sequence[LoadedCase[EvalCase]],
        *,
        split: str,
    ) -> None:
        locked_ids = {item.case.id: item for item in locked}
        locked_texts = {text_hash(text): item for item in locked for text in _case_texts(item.case)}
        leaks = []
        for item in examples:
            match = locked_ids.get(item.case.id) or next(
                (locked_texts[h] for h in map(text_hash, _case_texts(item.case)) if h in locked_texts), None
            )
            if match is not None:
                leaks.append(
                    f"{item.file}:{item.line}: case {item.case.id!r} is locked case {match.case.id!r} "
                    f"({match.file}:{match.line}) by id or text"
                )
        if leaks:
            raise LockedSplitError(
                f"split {split!r} holds locked cases; locked cases never feed prompts:\n" + "\n".join(leaks)
            )
        self.split = split
        self._cases = tuple(item.case for item in examples)

    def examples_for(self, case: EvalCase, limit: int) -> tuple[FewShotExample, ...]:
        """Up to ``limit`` single-text examples with a reference, same locale pair, never the case itself."""
        chosen = [
            FewShotExample(source=other.source, translation=other.references[0])
            for other in sorted(self._cases, key=lambda c: c.id)
            if other.id != case.id
            and other.references
            and other.protocol is None
            and (other.source_locale, other.target_locale) == (case.source_locale, case.target_locale)
        ]
        return tuple(chosen[:limit])


def translation_request(case: EvalCase, examples: Sequence[FewShotExample] = ()) -> TranslationRequest:
    protocol = case.protocol
    return TranslationRequest(
        source_locale=case.source_locale,
        target_locale=case.target_locale,
        syntax=_syntax(case),
        keep=tuple(dict.fromkeys([*_placeholder_texts(case), *_required(case)])),
        items=tuple(case.batch_items()) if protocol else (case.source,),
        batch=protocol is not None,
        terminator=protocol.params.terminator if protocol else None,
        examples=tuple(examples),
    )


def _language(tag: str) -> str:
    """A locale's name in English with its tag (``German (Germany) [de-DE]``); the tag alone when
    CLDR does not know it."""
    try:
        name = Locale.parse(tag, sep="-").english_name
    except (ValueError, UnknownLocaleError):
        return tag
    return f"{name} [{tag}]" if name else tag


def _instructions(request: TranslationRequest) -> list[str]:
    """What a chat model is asked, in plain words: the language pair, what to keep, how to reply."""
    source, target = _language(request.source_locale), _language(request.target_locale)
    lines = [f"Translate the text between <source> and </source> from {source} into {target}."]
    if request.keep:
        lines.append(f"Copy these exactly as written, unchanged: {', '.join(request.keep)}.")
    lines.append(
        "Keep every number's digits (write it without thousands separators if unsure); "
        "translate nothing inside placeholders such as {name} or %s."
    )
    if request.batch:
        end = f', then the line "{request.terminator}" alone' if request.terminator else ""
        lines.append(
            f"The text has {len(request.items)} numbered lines. Reply with one line per item, "
            f"'[n] translation', numbered as given and in order{end}. Nothing else."
        )
    else:
        lines.append("Reply with only the translation: no quotes, no notes, no explanation.")
    return lines


def render_request(request: TranslationRequest) -> str:
    """The prompt: a marker line with the request's JSON header (what a runtime reads back with
    :func:`parse_request`), plain instructions, examples, the text in a ``<source>`` block, and a
    cue naming the target language."""
    header = {
        "source_locale": request.source_locale,
        "target_locale": request.target_locale,
        "syntax": request.syntax,
        "keep": list(request.keep),
        "items": len(request.items) if request.batch else None,
        "terminator": request.terminator,
    }
    lines = [REQUEST_MARK, json.dumps(header, ensure_ascii=False), "", *_instructions(request)]
    for example in request.examples:
        lines += ["", EXAMPLE_MARK, _OPEN, example.source, _CLOSE, f"Translation: {example.translation}"]
    body = render_batch(request.items) if request.batch else request.items[0]
    lines += ["", _OPEN, body, _CLOSE, "Translation:"]
    return "\n".join(lines)


def compose_prompt(case: EvalCase, pool: FewShotPool | None = None, *, examples: int = 0) -> str:
    """The prompt for ``case``; examples only ever come from ``pool`` (an unlocked split)."""
    chosen = pool.examples_for(case, examples) if pool is not None and examples > 0 else ()
    return render_request(translation_request(case, chosen))


def parse_request(prompt: str) -> TranslationRequest | None:
    """The request a prompt carries, or None when it is not a translation request."""
    lines = prompt.split("\n")
    if len(lines) < 3 or lines[0] != REQUEST_MARK:
        return None
    header = json.loads(lines[1])
    start = len(lines) - 1 - lines[::-1].index(_OPEN)
    end = len(lines) - 1 - lines[::-1].index(_CLOSE)
    body = "\n".join(lines[start + 1 : end])
    batch = header["items"] is not None
    items = tuple(item.text for item in parse_batch(body, None).items) if batch else (body,)
    return TranslationRequest(
        source_locale=header["source_locale"],
        target_locale=header["target_locale"],
        syntax=header["syntax"],
        keep=tuple(header["keep"]),
        items=items,
        batch=batch,
        terminator=header["terminator"],
    )


def _syntax(case: EvalCase) -> str:
    spec = case.placeholder_spec
    return effective_syntax(case, spec) if spec is not None else "none"


def _placeholder_texts(case: EvalCase) -> list[str]:
    spec = case.placeholder_spec
    syntax = _syntax(case)
    if spec is None or syntax in {"icu", "none"}:
        return []
    try:
        return [p.text for p in flat_tokenizer(syntax, case.source, spec.params.pattern)(case.source).items]
    except PlaceholderSyntaxError:
        return []


def _required(case: EvalCase) -> list[str]:
    spec = case.assertion("required_tokens")
    if isinstance(spec, RequiredTokens):
        return required_token_list(case, spec)
    return list(case.required_tokens)
