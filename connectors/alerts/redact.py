"""A sink's URL out of every text gpufrag writes about it (logs, errors, dead letters).

A Slack webhook's path is its secret, a URL may carry a password or a token in its query, and
the HTTP client rewrites a URL before quoting it in an error (``%20`` for a space, a lowercased
host), so a search for the URL as configured misses it. Instead both sides are parsed: every URL
in the text is cut to ``scheme://host:port/***``, and every piece of the configured URL that
can be a secret (user, password, each path segment, each query part) is masked wherever it
still appears, with any of its characters percent-encoded or not.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MASK", "redact", "redacted_url"]

MASK = "***"

SECRET_MIN_CHARS = 4
"""Shorter pieces are masked only inside URLs: masking ``v2`` or ``api`` in free text would
garble the message and hide nothing (Slack's tokens are 24 characters, its ids 9-11)."""

_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>()\[\]{}|\\^`]*")
_AUTHORITY = re.compile(r"^\s*(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):)?//(?P<auth>[^/?#]*)")
_PIECE_SEPARATORS = re.compile(r"[/?#&=;:@\s]+")


def redacted_url(url: str) -> str:
    """``scheme://host:port`` of ``url``, with ``***`` for its user and password, path, query
    and fragment; just ``***`` when it has no ``scheme://host`` to keep."""
    found = _AUTHORITY.match(url)
    if found is None or not found["scheme"]:
        return MASK
    _, at, host = found["auth"].rpartition("@")
    rest = url[found.end() :]
    shown = f"{found['scheme']}://{MASK + '@' if at else ''}{host}"
    return shown + (f"/{MASK}" if rest.strip("/") else "")


def _pieces(url: str) -> set[str]:
    """The parts of ``url`` that may be secret, percent-decoded: all but its scheme and host."""
    found = _AUTHORITY.match(url)
    if found is None:  # not even scheme://host: every piece of it may be secret
        raw = _PIECE_SEPARATORS.split(url)
    else:
        user = found["auth"].rpartition("@")[0]
        raw = [*user.split(":"), *_PIECE_SEPARATORS.split(url[found.end() :])]
    decoded = (unquote(piece) for piece in raw)
    return {p for p in decoded if len(p) >= SECRET_MIN_CHARS}


def _any_encoding(piece: str) -> str:
    """A pattern for ``piece`` with each character as itself or percent-encoded (either hex
    case), a space also as ``+``: how a client or server may quote it."""
    out = []
    for ch in piece:
        forms = [re.escape(ch), "".join(f"%{byte:02x}" for byte in ch.encode())]
        if ch == " ":
            forms.append(r"\+")
        out.append(f"(?:{'|'.join(forms)})")
    return "".join(out)


def redact(text: str, url: str) -> str:
    """``text`` with every URL in it cut to its host and every secret-looking piece of ``url``
    (the sink's own, as configured) masked, whatever form the text quotes it in."""
    text = _URL_IN_TEXT.sub(lambda m: redacted_url(m.group()), text)
    pieces = sorted(_pieces(url), key=len, reverse=True)
    if not pieces:
        return text
    pattern = re.compile("|".join(_any_encoding(p) for p in pieces), re.IGNORECASE)
    return pattern.sub(MASK, text)
