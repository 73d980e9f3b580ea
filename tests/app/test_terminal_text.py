"""Text the cluster wrote, made safe for a terminal: escape sequences and control characters
go (newline and tab stay), and a long message is cut with a count of what is not shown."""

from __future__ import annotations

import pytest

from streams.app.console.terminal import MESSAGE_MAX_CHARS, for_terminal


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("0/4 nodes are available", "0/4 nodes are available"),
        ("a\x1b[2J\x1b[31mred\x1b[0m", "ared"),  # CSI: clear screen, colours
        ("a\x1b]0;new title\x07b", "ab"),  # OSC ended by BEL
        ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # OSC 8 hyperlink, ST ends
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("a\x1b7\x1b8b\x1b", "ab"),  # save/restore cursor, a lone ESC at the end
        ("a\x9b2Jb\x85c", "a2Jbc"),  # C1: the one-byte CSI and NEL go
        ("bell\x07 back\x08 cr\r nul\x00 del\x7f", "bell back cr nul del"),
        ("line one\n\tline two", "line one\n\tline two"),  # newline and tab kept
        ("gpu \u202etset\u202c ok \u2066x\u2069", "gpu tset ok x"),  # bidi overrides, isolates
    ],
    ids=[
        "plain",
        "csi",
        "osc-bel",
        "osc8-st",
        "dcs",
        "two-byte-and-lone-esc",
        "c1",
        "c0",
        "nl-tab",
        "bidi",
    ],
)
def test_control_sequences_are_removed(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown


def test_a_long_message_is_cut_with_the_rest_counted() -> None:
    text = "y" * (MESSAGE_MAX_CHARS + 1234)
    assert for_terminal(text) == "y" * MESSAGE_MAX_CHARS + "... (1234 more characters)"
    assert for_terminal("z" * 5_000_000, limit=10) == "z" * 10 + "... (4999990 more characters)"
    assert for_terminal("y" * MESSAGE_MAX_CHARS) == "y" * MESSAGE_MAX_CHARS  # not cut at the limit
