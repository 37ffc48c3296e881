"""``eval-pipeline notify test CHANNEL``: a sample message sent to a channel of
``evals/notify.yaml`` (what ``run --notify`` sends with: :mod:`eval_pipeline.cli.notifier`)."""

from __future__ import annotations

from typing import Annotated

import typer

from eval_pipeline.cli.common import EXIT_CHECK_FAILED, app, bad_input_exits, out, print_plain

notify_app = typer.Typer(help="Notifications: the channels of evals/notify.yaml.", no_args_is_help=True)
app.add_typer(notify_app, name="notify")


@notify_app.command("test")
def notify_test(
    channel: Annotated[str, typer.Argument(help="A channel of evals/notify.yaml.")],
) -> None:
    """Send a sample message to CHANNEL; exit 1 if it was not delivered."""
    from eval_pipeline.cli.notifier import sample_event
    from eval_pipeline.notify import NotifyConfig, dispatch, load_notify_config, notify_file
    from eval_pipeline.notify.config import Route, channel_url_problem

    with bad_input_exits():
        path = notify_file()
        config = load_notify_config(path)
        if channel not in config.channels:
            raise KeyError(f"{path}: no channel {channel!r}; channels: {sorted(config.channels)}")
        problem = channel_url_problem(config.channels[channel])
        if problem is not None:
            raise KeyError(f"channel {channel!r}: {problem}")
    only = NotifyConfig(
        channels={channel: config.channels[channel]},
        routes=[Route(channel=channel, events=["check_failed"])],
    )
    done = dispatch([sample_event()], only, ledger=None)
    for warning in done.warnings:
        print_plain(f"warning: notification {warning}")
    if not done.sent:
        raise typer.Exit(EXIT_CHECK_FAILED)
    out().print(f"sent a sample message to channel {channel!r}", highlight=False, markup=False)
