"""The published JSON Schema of EvalCase v1 (for editors and other tools), from the pydantic model."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.i18n.case import EvalCase

SCHEMA_FILE = "evalcase-v1.schema.json"  # the committed copy, in the lane folder


def evalcase_v1_schema() -> dict[str, Any]:
    schema = EvalCase.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def evalcase_v1_schema_text() -> str:
    return json.dumps(evalcase_v1_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
