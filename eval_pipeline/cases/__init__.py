"""Case files: loading, validation and the problems they can have."""

from eval_pipeline.cases.jsonl import JsonLine, LineProblem, LineRange, line_ranges, parse_jsonl, read_jsonl
from eval_pipeline.cases.loading import (
    CaseFileError,
    CaseProblem,
    CaseStream,
    FileProblemsError,
    FirstUses,
    LoadedCase,
    load_cases,
    parse_case_file,
    validate_record,
)

__all__ = [
    "CaseFileError",
    "CaseProblem",
    "CaseStream",
    "FileProblemsError",
    "FirstUses",
    "JsonLine",
    "LineProblem",
    "LineRange",
    "LoadedCase",
    "line_ranges",
    "load_cases",
    "parse_case_file",
    "parse_jsonl",
    "read_jsonl",
    "validate_record",
]
