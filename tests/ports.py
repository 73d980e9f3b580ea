"""Ports for the servers the tests start, chosen so that nothing else can take them first.

Binding port 0, closing and handing the number on leaves a gap in which the kernel may give
the same port to anyone: as the local port of an outgoing connection (the Kafka and HTTP
clients of the tests running beside it open hundreds), or to another test process doing the
same. Under `pytest -n 3` a worker command once failed to start for that reason, probably.
So the port comes from below the kernel's ephemeral range (``ip_local_port_range``, 32768-60999
by default), which outgoing connections and port-0 binds never use, and it is held by this
process through an advisory lock on a file named for it, so no other test process on the
machine picks it while this one lives.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

__all__ = ["free_port"]

_LOCKS = Path(tempfile.gettempdir()) / "gpufrag-test-ports"
_HELD: list[int] = []
"""Open lock files (fds): released when the process ends, not before, as the port may be
handed to a child that binds it later."""
_SPAN = 12_000
"""Ports tried below the ephemeral range: far more than the ~150 servers a whole run starts."""


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return max(low, 1024 + _SPAN)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, that no other test process is handed while
    this one runs, and that the kernel hands no one else."""
    _LOCKS.mkdir(exist_ok=True)
    high = _ephemeral_low()
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(high - _SPAN, high)
        fd = os.open(_LOCKS / str(port), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if _bindable(port):
            _HELD.append(fd)
            return port
        os.close(fd)
    raise RuntimeError(f"no free port below {high} after 500 tries")
