"""``evals/notify.yaml``: which webhooks hear about which lane runs.

::

    channels:
      team: {format: slack, url_env: TEAM_WEBHOOK_URL}     # the URL lives in the environment
      pager: {format: json, url_env: PAGER_HOOK}
    routes:
      - {channel: team, events: [check_failed, regression, void, stale, recovered], lanes: all}
      - {channel: pager, events: [check_failed], lanes: [refusal_calibration],
         runtimes: [staging], severity: [ERROR]}

A channel names the environment variable that holds its URL, never the URL itself. A route
sends the events it lists, of the lanes and runtime targets it lists (``all``: every one),
at the severities it lists (default: both). Every problem is reported as
``file:line: field: message``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from eval_pipeline.cases import CaseFileError, CaseProblem
from eval_pipeline.cases.strict_yaml import read_yaml_file
from eval_pipeline.core import evals_dir
from eval_pipeline.notify.delivery import webhook_url_problem

NOTIFY_FILE = "notify.yaml"
EventKind = Literal["check_failed", "regression", "void", "recovered", "stale"]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
Severity = Literal["ERROR", "WARN"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
ChannelFormat = Literal["slack", "json"]
CHANNEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class Channel(BaseModel):
    """A webhook: its payload format and the environment variable holding its URL."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: ChannelFormat
    url_env: str = Field(pattern=ENV_NAME, description="Environment variable holding the webhook URL.")


class Route(BaseModel):
    """Which events of which lane runs a channel hears."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    channel: str
    events: list[EventKind] = Field(min_length=1)
    lanes: Literal["all"] | list[str] = "all"
    runtimes: Literal["all"] | list[str] = "all"
    severity: list[Severity] = Field(default_factory=lambda: list(SEVERITIES))

    def hears(self, kind: EventKind, lane: str, runtime: str, severity: Severity) -> bool:
        return (
            kind in self.events
            and (self.lanes == "all" or lane in self.lanes)
            and (self.runtimes == "all" or runtime in self.runtimes)
            and severity in self.severity
        )


class NotifyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    channels: dict[str, Channel] = Field(default_factory=dict)
    routes: list[Route] = Field(default_factory=list)

    @model_validator(mode="after")
    def _routes_name_channels(self) -> NotifyConfig:
        for index, route in enumerate(self.routes):
            if route.channel not in self.channels:
                known = ", ".join(sorted(self.channels)) or "none declared"
                raise _FieldError(("routes", index, "channel"), f"no channel {route.channel!r} ({known})")
        return self

    def channels_for(self, kind: EventKind, lane: str, runtime: str, severity: Severity) -> list[str]:
        """The channels that hear this event, each once, in the order routes name them."""
        heard = [r.channel for r in self.routes if r.hears(kind, lane, runtime, severity)]
        return list(dict.fromkeys(heard))


class _FieldError(ValueError):
    """A cross-field problem, carried out of pydantic with the location it belongs to."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


def notify_file() -> Path:
    return evals_dir() / NOTIFY_FILE


def load_notify_config(
    path: Path,
    *,
    lanes: Collection[str] | None = None,
    runtimes: Collection[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> NotifyConfig:
    """The file's channels and routes; every problem as ``file:line: field: message``.

    ``lanes`` / ``runtimes``, when given, are the names a route may list; ``environ``, when
    given, must set every channel's ``url_env`` to an http(s) URL (what ``validate`` asks; at
    run time an unset variable or a bad URL is a warning, not bad input)."""
    # The one strict YAML reader: bounded, duplicate keys refused.
    parsed = read_yaml_file(path, CaseFileError)
    document = parsed.data
    problems: list[CaseProblem] = list(parsed.key_problems)
    if not isinstance(document, dict):
        raise CaseFileError(
            [*problems, CaseProblem(str(path), 1, "(file)", "expected a mapping with channels and routes")]
        )
    if problems:
        raise CaseFileError(problems)
    try:
        config = NotifyConfig.model_validate(document)
    except ValidationError as exc:
        for error in exc.errors():
            context = error.get("ctx", {}).get("error")
            loc = context.loc if isinstance(context, _FieldError) else tuple(error["loc"])
            message = context.message if isinstance(context, _FieldError) else error["msg"]
            problems.append(parsed.problem(loc, message))
        raise CaseFileError(problems) from None
    for index, route in enumerate(config.routes):
        for field, allowed in (("lanes", lanes), ("runtimes", runtimes)):
            listed = getattr(route, field)
            if allowed is None or listed == "all":
                continue
            for position, name in enumerate(listed):
                if name not in allowed:
                    loc = ("routes", index, field, position)
                    known = ", ".join(sorted(allowed))
                    problems.append(parsed.problem(loc, f"unknown {field[:-1]} {name!r} ({known})"))
    if environ is not None:
        for name, channel in config.channels.items():
            problem = channel_url_problem(channel, environ)
            if problem is not None:
                problems.append(parsed.problem(("channels", name, "url_env"), problem))
    if problems:
        raise CaseFileError(problems)
    return config


def configured(path: Path | None = None) -> NotifyConfig | None:
    """The notify file's config (None: there is none); bad input raises :class:`CaseFileError`."""
    path = notify_file() if path is None else path
    return load_notify_config(path) if path.exists() else None


def channel_url(channel: Channel, environ: Mapping[str, str] | None = None) -> str:
    """The channel's URL from its environment variable ('' when unset)."""
    return (os.environ if environ is None else environ).get(channel.url_env, "")


def channel_url_problem(channel: Channel, environ: Mapping[str, str] | None = None) -> str | None:
    """Why the channel's URL cannot be posted to (None: it can); never quotes the URL, a secret."""
    url = channel_url(channel, environ)
    if not url:
        return f"environment variable {channel.url_env} is not set"
    problem = webhook_url_problem(url)
    return None if problem is None else f"environment variable {channel.url_env}: {problem}"


def notify_file_problems(lanes: Collection[str], runtimes: Collection[str]) -> list[CaseProblem]:
    """What ``validate`` reports about the notify file (nothing when there is none): its schema,
    the lanes and runtime targets its routes name, and every ``url_env`` unset here."""
    path = notify_file()
    if not path.exists():
        return []
    try:
        load_notify_config(path, lanes=lanes, runtimes=runtimes, environ=os.environ)
    except CaseFileError as exc:
        return exc.problems
    return []
