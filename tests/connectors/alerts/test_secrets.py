"""A sink's URL is a secret (Slack's path, a password, a query token): whatever way a post
fails, with a URL the HTTP client rewrites before quoting it, a connection refused, or a real
server's error page that echoes the path, neither the log nor the dead letter holds a piece of
it; and the alert is still kept as a dead letter, with its reason."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from connectors.alerts import AlertmanagerSink, AlertSink, SlackSink, WebhookSink
from connectors.alerts.redact import redact, redacted_url
from tests.connectors.alerts.alerting import DeadLetters, dispatching, settings, storm, until
from tests.connectors.alerts.receiver import Receiver
from tests.ports import free_port

SECRET_MARK = "sekret"
"""In every secret piece of the URLs below and nowhere else, so one search finds any leak."""
USERINFO = "gpufrag:pwSEKRETpass"
PATH = "/services/T0SEKRET1/B0SEKRET2/xoxbSEKRETtoken"
QUERY = "?token=qSEKRETquery"

SINKS: dict[str, Callable[[str], AlertSink]] = {
    "alertmanager": lambda url: AlertmanagerSink(url, resend_interval_s=1.0),
    "slack": SlackSink,
    "webhook": WebhookSink,
}


def _url(failure: str, receiver: Receiver) -> str:
    if failure == "malformed":
        # a scheme typo and a space: the client refuses it and quotes it re-encoded (%20),
        # which a search for the configured text misses
        return f"htps://{USERINFO}@127.0.0.1:{receiver.port}{PATH.replace('xoxb', 'xoxb ')}{QUERY}"
    port = free_port() if failure == "refused" else receiver.port  # nothing listens on it
    return f"http://{USERINFO}@127.0.0.1:{port}{PATH}{QUERY}"


@pytest.mark.parametrize("failure", ["malformed", "refused", "http_error"])
@pytest.mark.parametrize("sink_name", list(SINKS))
async def test_a_failed_post_leaves_no_secret_in_logs_or_dead_letters(
    receiver: Receiver, caplog: pytest.LogCaptureFixture, sink_name: str, failure: str
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver.status, receiver.echo_path = 404, True  # "Cannot POST /services/T.../xoxb..."
    sink = SINKS[sink_name](_url(failure, receiver))
    dead = DeadLetters()
    async with dispatching([sink], settings(give_up_after_s=0.5), dead) as (d, _):
        d.submit(storm())
        await until(lambda: len(dead.kept) == 1)
    letter = dead.kept[0]
    expected = "rejected" if failure == "http_error" else "sink_down"
    assert (letter.source, letter.reason) == (f"alerts/{sink_name}", expected)
    assert f"alert sink {sink_name} failed" in caplog.text  # the failure was logged...
    if failure == "http_error":
        assert receiver.hits >= 1 and letter.detail.startswith("HTTP 404: Cannot POST /***")
    for text in (caplog.text, letter.detail, letter.reason, letter.raw):
        assert SECRET_MARK not in text.lower(), text  # ...without a piece of the URL


@pytest.mark.parametrize(
    ("text", "url", "shown"),
    [
        (
            "NonHttpUrlClientError: htps://u:pwSEKRET@h/T0/xoxb%20SEKRETtok?t=qSEKRET",
            "htps://u:pwSEKRET@h/T0/xoxb SEKRETtok?t=qSEKRET",
            "NonHttpUrlClientError: htps://***@h/***",
        ),
        ("HTTP 404: Cannot POST /a/xoxbSEKRETtok", "http://h:1/a/xoxbSEKRETtok", "HTTP 404: "),
        ("bad: HOOKS.example/T0/SEKRETtoken", "hooks.example/T0/SEKRETtoken", "bad: ***"),
        ("quoted: sek%72etTOKEN", "https://h/sekretTOKEN", "quoted: ***"),
        ("HTTP 400: invalid_payload", "http://127.0.0.1:9/hook", "HTTP 400: invalid_payload"),
    ],
    ids=["re-encoded", "echoed-path", "no-scheme", "percent-encoded", "nothing-to-hide"],
)
def test_redaction_parses_both_the_url_and_the_text(text: str, url: str, shown: str) -> None:
    got = redact(text, url)
    assert got.startswith(shown) and SECRET_MARK not in got.lower(), got


def test_a_redacted_url_keeps_where_it_goes_and_nothing_else() -> None:
    assert redacted_url("https://u:p@hooks.slack.com:443/services/T/B/x?y=1") == (
        "https://***@hooks.slack.com:443/***"
    )
    assert redacted_url("http://127.0.0.1:9093/") == "http://127.0.0.1:9093"
    assert redacted_url("hooks.slack.com/services/T/B/x") == "***"
