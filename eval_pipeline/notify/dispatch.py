"""Send a lane run's events to the channels whose routes hear them: the one path the CLI's
``--notify``, the Dagster sensor and ``notify test`` share."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eval_pipeline.history import connect
from eval_pipeline.history.previous import previous_run_id, run_failed
from eval_pipeline.notify.config import NotifyConfig, channel_url, channel_url_problem
from eval_pipeline.notify.delivery import Delivery, Ledger, post_json
from eval_pipeline.notify.events import Event, LaneRun, lane_run_events
from eval_pipeline.notify.render import Links, payload
from eval_pipeline.viewer import run_page_url

DAGSTER_URL_ENV = "EVAL_PIPELINE_DAGSTER_URL"  # the webserver's base URL: links to <base>/runs/<run_id>

Poster = Callable[[str, Mapping[str, object]], Delivery]


@dataclass
class Dispatched:
    """What a dispatch did: each message sent (channel, event kind, series), the duplicates it
    left out, and a warning for each delivery that failed."""

    sent: list[tuple[str, str, str]] = field(default_factory=list)
    duplicates: int = 0
    warnings: list[str] = field(default_factory=list)

    def add(self, other: Dispatched) -> None:
        self.sent += other.sent
        self.duplicates += other.duplicates
        self.warnings += other.warnings


def links_for(run_id: str, environ: Mapping[str, str] | None = None) -> Links:
    env = os.environ if environ is None else environ
    return Links.for_run(
        run_id, dagster_base=env.get(DAGSTER_URL_ENV, ""), viewer=run_page_url(run_id, env) or ""
    )


def dispatch(
    events: list[Event],
    config: NotifyConfig,
    ledger: Ledger | None,
    *,
    environ: Mapping[str, str] | None = None,
    post: Poster = post_json,
) -> Dispatched:
    """Send each event to every channel that hears it, once per series, event and night
    (``ledger`` None: no dedup, as for a sample message). Never raises for a delivery."""
    done = Dispatched()
    for event in events:
        for name in config.channels_for(event.kind, event.run.lane, event.run.runtime, event.severity):
            channel = config.channels[name]
            if ledger is not None and ledger.sent(name, event.dedup_key):
                done.duplicates += 1
                continue
            what = f"{event.kind} for {event.run.series.key} to channel {name!r}"
            problem = channel_url_problem(channel, environ)
            if problem is not None:
                done.warnings.append(f"not sent: {what}: {problem}")
                continue
            url = channel_url(channel, environ)
            delivered = post(url, payload(channel.format, event, links_for(event.run.run_id, environ)))
            if not delivered.ok:
                done.warnings.append(
                    f"not delivered: {what} after {delivered.attempts} attempt(s): {delivered.error}"
                )
                continue
            if ledger is not None:
                ledger.record(name, event.dedup_key, event.run.run_id)
            done.sent.append((name, event.kind, event.run.series.key))
    return done


def notify_lane_runs(
    runs: list[LaneRun],
    config: NotifyConfig,
    ledger: Ledger,
    *,
    history_root: str,
    environ: Mapping[str, str] | None = None,
    post: Poster = post_json,
) -> Dispatched:
    """Every event of each lane run (``recovered`` read from the series' history), dispatched."""
    done = Dispatched()
    for run in runs:
        try:
            previous_failed = previous_run_failed(history_root, run)
        except Exception as exc:  # history unreadable: say so, and still send the other events
            done.warnings.append(f"could not read the previous run of {run.series.key} from history: {exc}")
            previous_failed = None
        events = lane_run_events(run, previous_failed=previous_failed)
        done.add(dispatch(events, config, ledger, environ=environ, post=post))
    return done


def previous_run_failed(history_root: str, run: LaneRun) -> bool | None:
    """Whether the series' run before ``run`` failed (None: it has none)."""
    con = connect(history_root)
    try:
        previous = previous_run_id(con, run.series, run.run_id)
        return None if previous is None else run_failed(con, previous, run.lane)
    finally:
        con.close()
