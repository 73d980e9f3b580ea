"""Which process holds a chDB store, for the one line that says why it cannot be opened.

chDB's engine takes an exclusive ``flock`` on ``<store>/status`` and writes ``PID: N`` into it.
That pid alone is not enough to name the holder: the file outlives its writer, and a pid seen
from another pid namespace (a container) is some other process here. So the pid is believed only
when ``/proc`` shows that process with the status file open; otherwise ``/proc`` is scanned for
whoever has it open. Everything here is best effort: what cannot be read is left out, and the
caller still says the store is held.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from pathlib import Path

__all__ = ["lock_holder"]

_PROC = Path("/proc")
_CMDLINE_LIMIT = 160
"""Characters of the holder's command line kept: enough to tell a replay from a watch."""
_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]*@")
"""A password in a DSN on the holder's command line is not repeated in a message."""


def lock_holder(path: Path) -> str | None:
    """None if nobody holds the engine's lock on ``<path>/status``; else what is known of the
    holder: " (pid N: its command line)", " (pid N)", or "" when nothing could be found."""
    status = path / "status"
    try:
        fd = os.open(status, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            try:
                written = os.read(fd, 200).decode(errors="replace").splitlines()
            except OSError:
                written = []
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
    said = next((ln.split(":", 1)[1].strip() for ln in written if ln.startswith("PID:")), "")
    pid = _confirmed_pid(said, status)
    if pid is None:
        return f" (pid {said})" if said.isdigit() else ""
    command = _command_line(pid)
    return f" (pid {pid}: {command})" if command else f" (pid {pid})"


def _confirmed_pid(said: str, status: Path) -> int | None:
    """The pid that has ``status`` open: the one the file names when /proc agrees, else the
    first found by scanning /proc (processes of other users cannot be looked into)."""
    target = os.path.realpath(status)
    if said.isdigit() and _has_open(int(said), target):
        return int(said)
    try:
        pids = sorted(int(p.name) for p in _PROC.iterdir() if p.name.isdigit())
    except OSError:
        return None
    own = os.getpid()
    return next((p for p in pids if p != own and _has_open(p, target)), None)


def _has_open(pid: int, target: str) -> bool:
    fds = _PROC / str(pid) / "fd"
    try:
        for fd in fds.iterdir():
            try:
                if os.readlink(fd) == target:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def _command_line(pid: int) -> str:
    """The process's arguments joined by spaces ("" when it cannot be read), shortened."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    text = _PASSWORD.sub(r"\1***@", " ".join(" ".join(words).split()))
    return text if len(text) <= _CMDLINE_LIMIT else text[: _CMDLINE_LIMIT - 3] + "..."
