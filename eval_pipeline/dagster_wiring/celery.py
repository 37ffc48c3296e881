"""Celery execution: a lane run's steps run on Celery workers, one queue per runtime target.

``dagster-celery`` routes a step by its op's ``dagster-celery/queue`` tag, but a lane's ops
are the same for every runtime: the runtime is a partition key chosen at launch. So the
executor here routes each step of a run to, in order: the step's own queue tag, the run's
``dagster-celery/queue`` tag, the queue its runtime target declares (``queue:`` in
``evals/runtimes.yaml``), else the shared ``dagster`` queue. A slow HTTP runtime on its own
queue then ties up only the workers that listen to that queue.

Connection settings come from the environment only (``EVAL_PIPELINE_CELERY_BROKER``,
optionally ``EVAL_PIPELINE_CELERY_BACKEND``, default: the broker), read when a run starts
or a worker starts, never at import.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from celery.exceptions import DuplicateTaskNameWarning

# RetryMode: no public API turns the executor's `retries` config into what CeleryExecutor takes.
from dagster._core.execution.retries import RetryMode
from dagster_celery import core_execution_loop
from dagster_celery.core_execution_loop import core_celery_execution_loop
from dagster_celery.executor import CELERY_CONFIG, CeleryExecutor, _submit_task
from dagster_celery.make_app import make_app
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

from eval_pipeline.core import CELERY_BROKER_ENV, celery_backend, celery_broker, targets_file
from eval_pipeline.runtimes.targets import load_targets

QUEUE_TAG = DAGSTER_CELERY_QUEUE_TAG
# The run's orchestrating loop polls its steps' results every TICK_SECONDS, so each of a lane's
# sequential steps starts up to a tick after the one before ends. dagster-celery's tick is as
# long as a lane step itself; this shorter one keeps the steps close, and polling Redis that
# often costs little.
core_execution_loop.TICK_SECONDS = 0.2  # type: ignore[assignment]  # time.sleep takes a float
DEFAULT_QUEUE = "dagster"
RUNTIME_PARTITION_TAG = "dagster/partition/runtime"


class CeleryNotConfigured(ValueError):
    """The Celery executor was chosen but no broker is set."""


def broker_url(configured: str | None = None) -> str:
    url = configured or celery_broker()
    if not url:
        raise CeleryNotConfigured(
            f"the Celery executor needs a broker: set {CELERY_BROKER_ENV} (e.g. redis://127.0.0.1:6379/0)"
        )
    return url


def backend_url(broker: str, configured: str | None = None) -> str:
    return configured or celery_backend() or broker


def queue_for_run(tags: Mapping[str, str], target_queues: Callable[[], Mapping[str, str | None]]) -> str:
    """The queue a run's steps go to: its queue tag, else its runtime target's queue, else the default."""
    if tags.get(QUEUE_TAG):
        return tags[QUEUE_TAG]
    runtime = tags.get(RUNTIME_PARTITION_TAG)
    return (target_queues().get(runtime, None) if runtime else None) or DEFAULT_QUEUE


def declared_queues() -> dict[str, str | None]:
    """Each declared runtime target's queue (None: the default queue)."""
    return {name: target.queue for name, target in load_targets(targets_file()).items()}


class RoutedCeleryExecutor(CeleryExecutor):
    """dagster-celery's executor, with each run's steps routed by :func:`queue_for_run`."""

    def execute(self, plan_context: Any, execution_plan: Any) -> Any:
        run_queue = queue_for_run(plan_context.dagster_run.tags, declared_queues)

        def submit(app: Any, context: Any, step: Any, _queue: str, priority: int, known_state: Any) -> Any:
            queue = step.tags.get(QUEUE_TAG) or run_queue
            # dagster-celery declares its one step task again for every step it submits; the
            # first declaration serves them all, so Celery's duplicate-name warning is noise.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DuplicateTaskNameWarning)
                return _submit_task(app, context, step, queue, priority, known_state)

        return core_celery_execution_loop(plan_context, execution_plan, step_execution_fn=submit)


@dg.executor(
    name="celery",
    config_schema={**CELERY_CONFIG, "backend": dg.Field(dg.Noneable(dg.StringSource), is_required=False)},
    requirements=dg.multiple_process_executor_requirements(),
)
def celery_executor(init_context: dg.InitExecutorContext) -> RoutedCeleryExecutor:
    """Celery on the broker in ``EVAL_PIPELINE_CELERY_BROKER`` (or the executor's ``broker`` config)."""
    config: Mapping[str, Any] = init_context.executor_config
    broker = broker_url(config.get("broker"))
    return RoutedCeleryExecutor(
        broker=broker,
        backend=backend_url(broker, config.get("backend")),
        config_source=config.get("config_source"),
        include=config.get("include"),
        retries=RetryMode.from_config(config["retries"]),
    )


def worker_app(broker: str | None = None, backend: str | None = None) -> Any:
    """The Celery app a worker runs: dagster-celery's step task on this project's broker."""
    from dagster_celery.tasks import create_task

    url = broker_url(broker)
    executor = CeleryExecutor.for_cli(broker=url, backend=backend_url(url, backend))
    app = make_app(executor.app_args())
    create_task(app)
    return app


def worker_argv(queues: Sequence[str], concurrency: int, name: str, loglevel: str = "INFO") -> list[str]:
    """``celery worker`` arguments: one task at a time per process, so a long step never
    holds a second step hostage in its prefetch buffer."""
    return [
        "worker",
        f"--loglevel={loglevel}",
        "--queues",
        ",".join(queues),
        "--concurrency",
        str(concurrency),
        "--hostname",
        name,
        "--prefetch-multiplier=1",
        "--without-gossip",
        "--without-mingle",
    ]
