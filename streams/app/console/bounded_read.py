"""Files and stdin read with a size bound, a chunk at a time.

A wrong path (a disk image, ``/dev/zero``, a pipe that never ends) must stop the command after
at most the bound plus one chunk, never after the whole stream has been held: ``inspect
--kube-json /dev/zero`` once held 1.15 GB before refusing. Whatever cannot be read is one line
naming the file and the setting that bounds it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import typer

from streams.app.console.errors import EXIT_USAGE, user_errors

__all__ = ["CHUNK_BYTES", "fail", "read_bounded"]

CHUNK_BYTES = 1 << 20
"""Read at a time: past the bound by at most this much, and few calls for a large file."""
Check = Callable[[bytes, str], None]
"""Sees the first bytes and the name shown; raises (``fail``) for the wrong kind of file."""


def fail(message: str) -> typer.Exit:
    typer.echo(f"gpufrag: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _read(
    f: BinaryIO,
    source: str,
    *,
    cap: int,
    setting: str,
    hint: str,
    first: Check,
) -> bytes:
    data = bytearray()
    checked = False
    while len(data) <= cap:
        chunk = f.read(min(CHUNK_BYTES, cap + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
        if not checked and data.strip():
            first(bytes(data[:64]), source)  # a wrong kind of file stops here, not at the bound
            checked = True
    raise fail(f"{source} is over {cap} bytes ({setting}); {hint}")


def read_bounded(
    path: str | Path,
    *,
    cap: int,
    setting: str,
    hint: str,
    first: Check = lambda _head, _source: None,
) -> tuple[bytes, str]:
    """(the bytes, the name to show) of a file, or of stdin for "-"; ``first`` is called once
    some bytes are not blank."""
    if str(path) == "-":
        return _read(
            sys.stdin.buffer, "stdin", cap=cap, setting=setting, hint=hint, first=first
        ), "stdin"
    source = str(path)
    with user_errors():
        try:
            with Path(path).open("rb") as f:
                return _read(f, source, cap=cap, setting=setting, hint=hint, first=first), source
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise  # user_errors says these in its words
        except OSError as exc:  # an I/O error, a device that cannot be read
            raise fail(f"cannot read {source}: {exc.strerror or exc}") from None
