"""Which pod a process belongs to, from its cgroup path.

The kubelet puts every container in a cgroup whose path carries the pod's UID, in one of two
layouts: cgroupfs (``/kubepods/burstable/pod<uid>/<container-id>``) and systemd
(``kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope``).
"""

from __future__ import annotations

import re
from pathlib import Path

_CGROUPFS = re.compile(r"/kubepods(?:/[a-z-]+)?/pod([0-9a-f-]{36})(?:/([0-9a-f]{64}))?")
_SYSTEMD = re.compile(
    r"kubepods(?:-[a-z]+)?-pod([0-9a-f_]{36})\.slice(?:/(?:cri-containerd|crio|docker)-([0-9a-f]{64})\.scope)?"
)


def pod_uid_from_cgroup(text: str) -> tuple[str, str | None] | None:
    """(pod UID, container id or None) from the contents of /proc/<pid>/cgroup."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _CGROUPFS.search(path)
        if m:
            return m.group(1), m.group(2)
        m = _SYSTEMD.search(path)
        if m:
            return m.group(1).replace("_", "-"), m.group(2)
    return None


def pod_uid_of_pid(pid: int, *, proc: Path = Path("/proc")) -> tuple[str, str | None] | None:
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:  # the process is gone, or we may not look
        return None
    return pod_uid_from_cgroup(text)
