"""The few things every room shares and no room decides: where things live (settings),
the registry pattern, the bounds of declarations (limits), a series' identity, small memos and
the pause of the cyclic garbage collector around a batch.

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.core.collector import (
        collector_paused,
        each_without_collector,
        frozen_after,
        no_final_collection,
        return_arrow_memory,
    )
    from eval_pipeline.core.durations import duration_text
    from eval_pipeline.core.finish_reasons import TOKEN_LIMIT, finish_reason, with_truncation
    from eval_pipeline.core.limits import MAX_CONCURRENCY, MAX_REPEAT
    from eval_pipeline.core.memo import Recent, content_sha256
    from eval_pipeline.core.problems import CaseProblem, FileProblemsError
    from eval_pipeline.core.registry import Registry
    from eval_pipeline.core.series import SERIES_COLUMN_NAMES, SERIES_MATCH, SERIES_SQL, OfSeries, Series
    from eval_pipeline.core.settings import (
        CELERY_BROKER_ENV,
        DEFAULT_LANES,
        DEFAULT_STATE,
        EVALS_ENV,
        MARKER_FILE,
        MARKER_TABLE,
        RUNTIMES_FILE,
        NoProjectError,
        SettingError,
        celery_backend,
        celery_broker,
        dagster_home,
        evals_dir,
        find_project,
        history_root,
        instance_template,
        pin_project,
        runtime_spec,
        state_dir,
        targets_file,
        whole_number_env,
    )

_EXPORTS: dict[str, str] = {
    "CELERY_BROKER_ENV": "settings",
    "CaseProblem": "problems",
    "DEFAULT_LANES": "settings",
    "DEFAULT_STATE": "settings",
    "EVALS_ENV": "settings",
    "FileProblemsError": "problems",
    "MARKER_FILE": "settings",
    "MARKER_TABLE": "settings",
    "MAX_CONCURRENCY": "limits",
    "MAX_REPEAT": "limits",
    "NoProjectError": "settings",
    "OfSeries": "series",
    "RUNTIMES_FILE": "settings",
    "Recent": "memo",
    "Registry": "registry",
    "SERIES_COLUMN_NAMES": "series",
    "SERIES_MATCH": "series",
    "SERIES_SQL": "series",
    "Series": "series",
    "SettingError": "settings",
    "TOKEN_LIMIT": "finish_reasons",
    "celery_backend": "settings",
    "celery_broker": "settings",
    "collector_paused": "collector",
    "content_sha256": "memo",
    "dagster_home": "settings",
    "duration_text": "durations",
    "each_without_collector": "collector",
    "evals_dir": "settings",
    "find_project": "settings",
    "finish_reason": "finish_reasons",
    "frozen_after": "collector",
    "history_root": "settings",
    "instance_template": "settings",
    "no_final_collection": "collector",
    "pin_project": "settings",
    "return_arrow_memory": "collector",
    "runtime_spec": "settings",
    "state_dir": "settings",
    "targets_file": "settings",
    "whole_number_env": "settings",
    "with_truncation": "finish_reasons",
}
__all__ = [
    "CELERY_BROKER_ENV",
    "DEFAULT_LANES",
    "DEFAULT_STATE",
    "EVALS_ENV",
    "MARKER_FILE",
    "MARKER_TABLE",
    "MAX_CONCURRENCY",
    "MAX_REPEAT",
    "RUNTIMES_FILE",
    "SERIES_COLUMN_NAMES",
    "SERIES_MATCH",
    "SERIES_SQL",
    "TOKEN_LIMIT",
    "CaseProblem",
    "FileProblemsError",
    "NoProjectError",
    "OfSeries",
    "Recent",
    "Registry",
    "Series",
    "SettingError",
    "celery_backend",
    "celery_broker",
    "collector_paused",
    "content_sha256",
    "dagster_home",
    "duration_text",
    "each_without_collector",
    "evals_dir",
    "find_project",
    "finish_reason",
    "frozen_after",
    "history_root",
    "instance_template",
    "no_final_collection",
    "pin_project",
    "return_arrow_memory",
    "runtime_spec",
    "state_dir",
    "targets_file",
    "whole_number_env",
    "with_truncation",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
