"""A URL setting gpufrag POSTs to or links to, checked when the settings load: a typo is one line
at start-up, not an alert lost hours later when the first POST fails.

The messages never quote the URL: a Slack webhook's path is its secret, and a URL with a
password carries one too.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

__all__ = ["HTTP_URL_MAX_CHARS", "HttpUrlText", "check_http_url"]

HTTP_URL_MAX_CHARS = 2048
"""The longest URL browsers and proxies reliably pass on; a Slack webhook is about 80."""


def check_http_url(value: str) -> str:
    """``value`` if it is an absolute http(s) URL with a host and a port in 1..65535; else a
    validation error that says what is wrong without quoting it."""
    if len(value) > HTTP_URL_MAX_CHARS:
        raise _refused(f"a URL of at most {HTTP_URL_MAX_CHARS} characters is needed")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise _refused("not a URL: it has spaces or control characters")
    try:
        parts = urlsplit(value)
    except ValueError:  # an IPv6 host's [ left open
        raise _refused("not a well-formed URL") from None
    if not value.lower().startswith(("http://", "https://")):
        raise _refused("the URL must start with http:// or https://")
    try:
        port = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError:
        port = 0
    if port == 0:
        raise _refused("the URL's port must be a number from 1 to 65535")
    if not parts.hostname:
        raise _refused("the URL has no host")
    return value


def _refused(why: str) -> PydanticCustomError:
    # a custom error reads as ``why`` alone, without pydantic's "Value error, " in front
    return PydanticCustomError("http_url", why)


HttpUrlText = Annotated[str, AfterValidator(check_http_url)]
"""An http(s) URL kept as the text given (the HTTP client parses it again when it posts)."""
