"""Case files: loading, validation and the problems they can have."""

from eval_pipeline.cases.loading import (
    CaseFileError,
    CaseProblem,
    LoadedCase,
    duplicate_id_problems,
    load_cases,
    parse_case_file,
)

__all__ = [
    "CaseFileError",
    "CaseProblem",
    "LoadedCase",
    "duplicate_id_problems",
    "load_cases",
    "parse_case_file",
]
