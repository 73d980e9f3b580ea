"""One POST of a JSON body, with every way it can fail turned into a ``SinkError`` that says
whether trying again can help."""

from __future__ import annotations

import aiohttp

__all__ = ["SinkError", "post_json"]

ANSWER_MAX_CHARS = 300
"""Enough of an error answer to say why (Alertmanager's validation messages are one line)."""


class SinkError(Exception):
    def __init__(self, reason: str, detail: str, *, retriable: bool) -> None:
        super().__init__(detail)
        self.reason = reason
        """A short code for metrics and dead letters: ``unreachable``, ``timeout``,
        ``http_<status>``."""
        self.detail = detail
        self.retriable = retriable


async def post_json(session: aiohttp.ClientSession, url: str, body: bytes) -> None:
    try:
        async with session.post(
            url, data=body, headers={"Content-Type": "application/json"}
        ) as resp:
            if resp.status < 300:
                await resp.read()  # the answer is drained so the connection is reused
                return
            answer = " ".join((await resp.text(errors="replace")).split())[:ANSWER_MAX_CHARS]
            # 4xx says the alerts are wrong and will be refused again, except a timeout or a
            # rate limit; 5xx and anything else may pass on a later try
            retriable = resp.status >= 500 or resp.status in (408, 429)
            raise SinkError(
                f"http_{resp.status}", f"HTTP {resp.status}: {answer}", retriable=retriable
            )
    except TimeoutError:
        raise SinkError("timeout", "no answer within the timeout", retriable=True) from None
    except (aiohttp.ClientError, OSError) as exc:
        # a Slack webhook's URL is its secret; an error about a bad URL would quote it
        detail = f"{type(exc).__name__}: {exc}".replace(url, "<url>")
        raise SinkError("unreachable", detail, retriable=True) from None
