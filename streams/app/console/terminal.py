"""Text from the cluster made safe to print on a terminal.

A scheduler message, a condition's text or an event's reason is written by whoever runs the
cluster's components: an escape sequence in it would move the cursor, retitle the window or
hide the lines before it, and a 5 MB message would bury the analysis. Every command that prints
such text passes it through ``for_terminal`` first.
"""

from __future__ import annotations

import re

__all__ = ["MESSAGE_MAX_CHARS", "for_terminal"]

MESSAGE_MAX_CHARS = 2000
"""Characters of one message shown. kube-scheduler's longest FailedScheduling messages (one
clause per reason, 0/5000 nodes) are some 500; longer text is cut with a count of the rest."""

_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen clears
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # any other escape (and a lone ESC)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 but newline and tab, DEL, C1 (whose 0x9b is a one-byte CSI on some terminals), and the
Unicode bidirectional controls, which reorder what a terminal shows (a reason could be made
to read backwards)."""


def for_terminal(text: str, *, limit: int = MESSAGE_MAX_CHARS) -> str:
    """``text`` with escape sequences and control characters removed (newline and tab kept),
    cut to ``limit`` characters with "... (N more characters)" after it."""
    # cut first, generously: a 5 MB message is not scanned whole to show 2,000 characters
    head = text[: limit * 4]
    clean = _CONTROL.sub("", _SEQUENCE.sub("", head))
    rest = len(text) - len(head)
    if len(clean) > limit:
        rest += len(clean) - limit
        clean = clean[:limit]
    return clean if rest <= 0 else f"{clean}... ({rest} more characters)"
