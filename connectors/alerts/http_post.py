"""One POST of a JSON body, with every way it can fail turned into a ``SinkError`` that says
whether trying again can help, and whose text never quotes the sink's URL (see ``redact``)."""

from __future__ import annotations

import aiohttp

from connectors.alerts.redact import redact
from connectors.alerts.sink_registry import SinkError

__all__ = ["post_json"]

ANSWER_MAX_CHARS = 300
"""Enough of an error answer to say why (Alertmanager's validation messages are one line)."""
ANSWER_READ_BYTES = 64 * 1024
"""Read of an error answer: an HTML error page fits; a server answering gigabytes is cut."""


async def post_json(session: aiohttp.ClientSession, url: str, body: bytes) -> None:
    try:
        async with session.post(
            url, data=body, headers={"Content-Type": "application/json"}
        ) as resp:
            if resp.status < 300:
                await resp.read()  # the answer is drained so the connection is reused
                return
            # redacted before it is cut, so no cut leaves half a secret unrecognised: a server
            # may echo the path ("Cannot POST /services/...")
            raw = (await resp.content.read(ANSWER_READ_BYTES)).decode(errors="replace")
            answer = redact(" ".join(raw.split()), url)[:ANSWER_MAX_CHARS]
            # 4xx says the alerts are wrong and will be refused again, except a timeout or a
            # rate limit; 5xx and anything else may pass on a later try
            retriable = resp.status >= 500 or resp.status in (408, 429)
            raise SinkError(
                f"http_{resp.status}", f"HTTP {resp.status}: {answer}", retriable=retriable
            )
    except SinkError:
        raise
    except TimeoutError:
        raise SinkError("timeout", "no answer within the timeout", retriable=True) from None
    except Exception as exc:
        # aiohttp.ClientError and OSError mostly; anything else the client raises (a ValueError
        # on a URL it cannot use) fails this post the same way rather than end the sink's loop
        # unseen with its alerts unsent. A Slack webhook's URL is its secret, and an error
        # about a bad URL quotes it: redacted
        detail = redact(f"{type(exc).__name__}: {exc}", url)
        raise SinkError("unreachable", detail, retriable=True) from None
