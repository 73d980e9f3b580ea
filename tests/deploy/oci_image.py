"""gpufrag's OCI image built by deploy/image/build.sh, unpacked, and run the way its config says.

A container runtime is not at hand, so a run is what one would do, with the host's tools: the
image's config (umoci's runtime config.json) gives the user, the argv prefix (the entrypoint), the
environment and the working directory. In a private mount namespace the root filesystem is
bind-mounted onto itself read-only (as ``readOnlyRootFilesystem: true`` does), a host directory
is bind-mounted writable at /data (the volume), a tmpfs is at /tmp (chDB makes its scratch
directory there; the chart mounts an emptyDir at both), /proc, /dev and /sys (read-only) are the
runtime's (chDB reads its memory limit from /sys/fs/cgroup and opens no store without it); then
``chroot --userspec`` drops to the image's user. Needs root, mmdebstrap and umoci (``.ci/run``
installs them); without them the tests fail rather than skip, so a CI machine that lost them is
noticed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO_ROOT

IMAGE_DIR = REPO_ROOT / "deploy" / "image"
BUILD_TIMEOUT_S = 2400
"""A cold build took 117-221 s here (mmdebstrap 43-166 s, 430 MB of wheels, the assembly 47 s);
40 minutes leaves room for a slow mirror on a busy 2-core machine."""

RUN_TIMEOUT_S = 300
"""One command in the image; the replay below takes 2 s on the host."""

# Mounts a runtime would make, then runs "$@" as the image's user in the read-only root.
_RUNNER = r"""
set -eu
rootfs=$1 data=$2 user=$3 cwd=$4
shift 4
mount --bind "$rootfs" "$rootfs"
mount -o remount,bind,ro "$rootfs"
mount --bind "$data" "$rootfs/data"
mount -t tmpfs -o mode=1777,size=1g tmpfs "$rootfs/tmp"
mount -t proc proc "$rootfs/proc"
mount --rbind /dev "$rootfs/dev"
mount --rbind /sys "$rootfs/sys"
mount -o remount,bind,ro "$rootfs/sys"
exec chroot --userspec="$user" "$rootfs" /usr/bin/env -i -C "$cwd" "$@"
"""


@dataclass(frozen=True, kw_only=True)
class Image:
    """An unpacked image: its root filesystem and the process its config describes."""

    layout: str
    rootfs: Path
    uid: int
    gid: int
    entrypoint: list[str]
    env: list[str]
    cwd: str
    labels: dict[str, str]
    """The image config's labels, read from the layout's blobs."""
    volumes: list[str]
    """The image config's volumes, sorted."""


def image_config(layout: str) -> dict[str, Any]:
    """The OCI image config of ``LAYOUT:TAG``: index -> manifest -> config blob."""
    path, _, tag = layout.rpartition(":")
    root = Path(path)

    def blob(descriptor: dict[str, Any]) -> dict[str, Any]:
        algorithm, digest = descriptor["digest"].split(":")
        loaded: dict[str, Any] = json.loads((root / "blobs" / algorithm / digest).read_text())
        return loaded

    index = json.loads((root / "index.json").read_text())
    tagged = [
        m
        for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    assert len(tagged) == 1, index
    return blob(blob(tagged[0])["config"])


def missing_tools() -> list[str]:
    """What a build and a run here need and this machine lacks."""
    missing = [t for t in ("mmdebstrap", "umoci", "unshare", "chroot") if not shutil.which(t)]
    if os.geteuid() != 0:
        missing.append("root (mmdebstrap --mode=root, chroot and mounts)")
    return missing


def build_and_unpack(into: Path) -> Image:
    """Runs build.sh (a cache hit when nothing changed) and unpacks its image under ``into``."""
    lacking = missing_tools()
    if lacking:
        pytest.fail(f"the image tests need {', '.join(lacking)} (.ci/run installs the tools)")
    built = subprocess.run(
        ["bash", str(IMAGE_DIR / "build.sh")],
        # this Python has pip (a Debian python3 may not) to download and build the wheels
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, f"build.sh failed:\n{built.stderr[-4000:]}"
    layout = built.stdout.strip().splitlines()[-1]
    bundle = into / "bundle"
    unpacked = subprocess.run(
        ["umoci", "unpack", "--image", layout, str(bundle)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert unpacked.returncode == 0, unpacked.stderr
    process = json.loads((bundle / "config.json").read_text())["process"]
    config = image_config(layout)["config"]
    return Image(
        layout=layout,
        rootfs=bundle / "rootfs",
        uid=process["user"]["uid"],
        gid=process["user"]["gid"],
        entrypoint=process["args"],
        env=process["env"],
        cwd=process["cwd"],
        labels=config["Labels"],
        volumes=sorted(config["Volumes"]),
    )


def run_in(
    image: Image, *, data: Path, argv: list[str], entrypoint: bool = True
) -> subprocess.CompletedProcess[str]:
    """``argv`` after the image's entrypoint (or alone), as its user, its root read-only, ``data``
    writable at /data."""
    data.mkdir(parents=True, exist_ok=True)
    os.chown(data, image.uid, image.gid)
    command = [*image.entrypoint, *argv] if entrypoint else argv
    return subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            _RUNNER,
            "run",
            str(image.rootfs),
            str(data),
            f"{image.uid}:{image.gid}",
            image.cwd,
            *image.env,
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
