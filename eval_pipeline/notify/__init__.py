"""Notifications: ``evals/notify.yaml`` routes a lane run's events (check failed, regression,
void, recovered) to Slack or JSON webhooks; the CLI's ``--notify`` and the Dagster sensor send
them through the same code, once per series, event and night."""

from eval_pipeline.notify.config import (
    EVENT_KINDS,
    Channel,
    NotifyConfig,
    Route,
    configured,
    load_notify_config,
    notify_file,
)
from eval_pipeline.notify.delivery import Delivery, Ledger, instance_ledger, post_json
from eval_pipeline.notify.dispatch import (
    Dispatched,
    dispatch,
    links_for,
    notify_lane_runs,
    previous_run_failed,
)
from eval_pipeline.notify.events import Event, FailingCase, LaneRun, lane_run_events
from eval_pipeline.notify.render import Links, json_payload, slack_payload

__all__ = [
    "EVENT_KINDS",
    "Channel",
    "Delivery",
    "Dispatched",
    "Event",
    "FailingCase",
    "LaneRun",
    "Ledger",
    "Links",
    "NotifyConfig",
    "Route",
    "configured",
    "dispatch",
    "instance_ledger",
    "json_payload",
    "lane_run_events",
    "links_for",
    "load_notify_config",
    "notify_file",
    "notify_lane_runs",
    "post_json",
    "previous_run_failed",
    "slack_payload",
]
