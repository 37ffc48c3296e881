"""The cases of one batch as a stage reads them back from the cases table.

The cases stage stores each validated case as canonical JSON; later stages take them back
as a :class:`CaseBatch`: its ids and a field's values come straight from that JSON, and the
case models are validated only when a stage reads one, once per table for all stages of a
small run (see :data:`_HYDRATED`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pydantic import BaseModel

from eval_pipeline.core import Recent

# Case models by (model, digest of the stored JSON): the stages of a run of one or two
# batches hydrate the same cases table, so its cases are validated once, not once per stage.
_HYDRATED: Recent[list[BaseModel]] = Recent(2)


def _digest(texts: Sequence[str]) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.digest()


def remember_models(texts: Sequence[str], models: list[BaseModel]) -> None:
    """The models just validated for ``texts`` (what the stages of this run will read back)."""
    if models:
        _HYDRATED.put((type(models[0]), _digest(texts)), models)


class CaseBatch(Sequence[BaseModel]):
    """The case models of a cases table, validated from their stored JSON on first use: a
    stage that reads only how many cases there are, their ids, or a few plain fields
    (:func:`field_values`) validates nothing. ``texts`` may be a function that reads the JSON:
    a stage that reads only ids and counts then never reads it."""

    def __init__(
        self, model: type[BaseModel], ids: list[str], texts: list[str] | Callable[[], list[str]]
    ) -> None:
        self._model = model
        self.ids = ids
        self._read_texts = texts if callable(texts) else None  # the stored JSON, read when first needed
        self._text_list = None if callable(texts) else texts
        self._models: list[BaseModel] | None = None
        self._records: list[dict[str, Any]] | None = None

    @property
    def _texts(self) -> list[str]:
        """Each case's stored JSON (read now, when the batch was given how to read it)."""
        if self._text_list is None:
            assert self._read_texts is not None
            self._text_list = self._read_texts()
        return self._text_list

    @property
    def models(self) -> list[BaseModel]:
        if self._models is None:
            model, texts = self._model, self._texts
            self._models = _HYDRATED.get(
                (model, _digest(texts)), lambda: [model.model_validate_json(t) for t in texts]
            )
        return self._models

    @property
    def hydrated(self) -> bool:
        """Whether the case models are built (then a field is read from them, not the JSON)."""
        return self._models is not None

    def field(self, name: str) -> list[Any]:
        """Field ``name`` of every case as stored (a validated case's canonical JSON value)."""
        if self._models is not None:
            return [getattr(case, name) for case in self._models]
        if self._records is None:
            self._records = json.loads("[" + ",".join(self._texts) + "]")
        return [record[name] for record in self._records]

    def stored_columns(self, schema: pa.Schema) -> pa.Table | None:
        """The fields of ``schema`` of every case, read by Arrow from the stored JSON (each a
        validated case's canonical value); None when some case does not hold a field as the
        type ``schema`` gives it (Arrow does not read it so)."""
        options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        try:
            table = pa_json.read_json(pa.py_buffer("\n".join(self._texts).encode()), parse_options=options)
        except pa.ArrowInvalid:
            return None
        return table if table.num_rows == len(self.ids) else None

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> BaseModel: ...

    @overload
    def __getitem__(self, index: slice) -> list[BaseModel]: ...

    def __getitem__(self, index: int | slice) -> BaseModel | list[BaseModel]:
        return self.models[index]

    def __iter__(self) -> Iterator[BaseModel]:
        return iter(self.models)


def case_ids(cases: Sequence[Any]) -> list[str]:
    """Every case's id (a batch's without building its models)."""
    return list(cases.ids) if isinstance(cases, CaseBatch) else [case.id for case in cases]


def field_values(cases: Sequence[Any], name: str) -> list[Any]:
    """Field ``name`` of every case: a plain value (text, number, list of texts) a rule reads,
    from a batch's stored JSON without building its models."""
    return cases.field(name) if isinstance(cases, CaseBatch) else [getattr(case, name) for case in cases]


# Joins a list's texts into one while its distinct lists are found (a text holding it is read
# the plain way).
_SEPARATOR = "\x1f"
DistinctLists = tuple[list[tuple[Any, ...]], np.ndarray[Any, Any]]


def distinct_lists(cases: Sequence[Any], names: Sequence[str]) -> dict[str, DistinctLists]:
    """Each field of ``names``, a list, of every case as its distinct lists (cases share a few)
    and the index of each case's list among them; a null field lists nothing. A batch's lists
    of texts are read from its stored JSON by Arrow, all in one pass and without a Python object
    per case; anything else the plain way (:func:`field_values`)."""
    found: dict[str, DistinctLists] = {}
    if isinstance(cases, CaseBatch) and not cases.hydrated and cases.ids and names:
        found = _arrow_distinct_lists(cases, names)
    for name in names:
        if name not in found:
            index: dict[tuple[Any, ...], int] = {}
            values = field_values(cases, name)
            of_case = np.fromiter(
                (index.setdefault(tuple(value or ()), len(index)) for value in values),
                dtype=np.int64,
                count=len(values),
            )
            found[name] = (list(index), of_case)
    return found


def _arrow_distinct_lists(cases: CaseBatch, names: Sequence[str]) -> dict[str, DistinctLists]:
    """The fields of ``names`` that every case of ``cases`` holds as a list of texts (or null)."""
    schema = pa.schema([(name, pa.list_(pa.string())) for name in dict.fromkeys(names)])
    table = cases.stored_columns(schema)
    if table is None:  # a field is not a list of texts in some case
        return {}
    found: dict[str, DistinctLists] = {}
    for name in schema.names:
        column = table[name]
        items = pc.list_flatten(column)
        # A text holding the separator, or an empty text (a list of one joins as the empty
        # list), would make two lists alike: such a field is read the plain way.
        if pc.any(pc.or_(pc.match_substring(items, _SEPARATOR), pc.equal(items, ""))).as_py():
            continue
        joined = pc.binary_join(column, _SEPARATOR).fill_null("").combine_chunks().dictionary_encode()
        lists = [tuple(text.split(_SEPARATOR)) if text else () for text in joined.dictionary.to_pylist()]
        found[name] = (lists, joined.indices.to_numpy(zero_copy_only=False).astype(np.int64))
    return found
