"""One exposition line in its common form, read in time linear in its length.

prometheus-client's line parser rescans the rest of the line for each label, and counts the
backslashes before each quote one by one: a 1 MB line of 100,000 labels took some 6 s, a 10 MB
page of them minutes. Every line an exporter writes has the plain form ``name{a="b",...} value
[timestamp]``; that form is read here with regular expressions that never look back, giving
exactly what prometheus-client gives for it (name, labels unescaped the same way, an int value
kept an int, the timestamp in seconds). A line in any other form is left to prometheus-client
when it is short, and refused when it is long (``SLOW_PARSE_MAX_CHARS``).
"""

from __future__ import annotations

import re

__all__ = ["SLOW_PARSE_MAX_CHARS", "Parsed", "parse_common"]

SLOW_PARSE_MAX_CHARS = 4096
"""Longest line handed to prometheus-client's parser (a dcgm-exporter line is some 250
characters, 500 with Kubernetes pod labels); at this length its rescans cost under 10 ms."""

Parsed = tuple[str, dict[str, str], int | float, float | None]
"""(name, labels, value, timestamp in seconds)."""

_HEAD = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*(\{)?")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"[ \t]*')
_NEXT = re.compile(r",|\}")
_TAIL = re.compile(r"[ \t]*([^ \t]+)(?:[ \t]+([^ \t]+))?[ \t]*")
_ESCAPE = re.compile(r'\\[\\n"]')
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


def _value(text: str) -> int | float:
    """prometheus-client's reading: an int when int() takes it, else a float; "_" and
    surrounding whitespace (which int() would strip) refused."""
    if "_" in text or text != text.strip():
        raise ValueError(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def _labels(text: str, pos: int) -> tuple[dict[str, str], int] | None:
    """The labels from just after "{", and the position after "}"; None for another form."""
    labels: dict[str, str] = {}
    while True:
        if text.startswith("}", pos):  # "{}", or a trailing comma before "}"
            return labels, pos + 1
        found = _LABEL.match(text, pos)
        if found is None:
            return None
        name, raw = found.groups()
        if name.startswith("__") or name in labels:
            return None  # reserved or repeated: prometheus-client's own refusal reads better
        labels[name] = _ESCAPE.sub(lambda m: _UNESCAPED[m.group(0)], raw) if "\\" in raw else raw
        sep = _NEXT.match(text, found.end())
        if sep is None:
            return None
        if sep.group(0) == "}":
            return labels, sep.end()
        pos = sep.end()


def parse_common(text: str) -> Parsed | None:
    """The line read, None when it is not in the common form; ValueError for a value or
    timestamp that is no number (as prometheus-client raises)."""
    head = _HEAD.match(text)
    if head is None:
        return None
    labels: dict[str, str] = {}
    pos = head.end()
    if head.group(2):
        read = _labels(text, pos)
        if read is None:
            return None
        labels, pos = read
    elif pos == len(text) or text[pos - 1] not in " \t":
        return None
    tail = _TAIL.fullmatch(text, pos)
    if tail is None or tail.group(1).startswith("#"):
        return None
    value, stamp = tail.groups()
    timestamp = None if stamp is None else _value(stamp) / 1000
    return head.group(1), labels, _value(value), timestamp
