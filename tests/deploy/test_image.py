"""The OCI image build.sh makes from Debian's packages and the locked wheels, run as its config
says: its own non-root user, its entrypoint, the root filesystem read-only, /data a volume."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.dockerfile import exec_form, final_stage, pairs
from tests.deploy.oci_image import Image, build_and_unpack, run_in
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.deploy

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "version"
]
REPLAY = ["replay", "--json", "--node-limit", "8"]
"""Eight nodes of the bundled trace: 96 events, 2 s on the host."""


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    yield build_and_unpack(tmp_path_factory.mktemp("image"))


def test_the_image_runs_as_its_non_root_user_and_prints_its_version(
    image: Image, tmp_path: Path
) -> None:
    assert (image.uid, image.gid) == (10001, 10001)
    assert image.entrypoint == ["gpufrag"]
    out = run_in(image, data=tmp_path / "data", argv=["--version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"gpufrag {VERSION}"
    who = run_in(image, data=tmp_path / "data", argv=["id", "-u"], entrypoint=False)
    assert who.stdout.strip() == "10001", who.stderr


def test_only_the_volumes_are_writable(image: Image, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for target in ("/opt/gpufrag/probe", "/etc/probe", "/var/tmp/probe", "/probe"):
        out = run_in(image, data=data, argv=["touch", target], entrypoint=False)
        assert out.returncode != 0, target
        assert "Read-only file system" in out.stderr, (target, out.stderr)
    out = run_in(image, data=data, argv=["touch", "/data/probe"], entrypoint=False)
    assert out.returncode == 0, out.stderr
    assert (data / "probe").stat().st_uid == 10001
    out = run_in(image, data=data, argv=["touch", "/tmp/probe"], entrypoint=False)
    assert out.returncode == 0, out.stderr


def test_replay_in_the_image_stores_on_the_volume_and_counts_what_the_checkout_counts(
    image: Image, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    inside = run_in(image, data=data, argv=REPLAY)
    assert inside.returncode == 0, inside.stderr
    summary = json.loads(inside.stdout)
    here = subprocess.run(
        [sys.executable, "-m", "streams.app", *REPLAY, "--store", f"chdb://{tmp_path / 'host'}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert here.returncode == 0, here.stderr
    expected = json.loads(here.stdout)
    assert summary["status"] == "finished"
    assert summary["events"] == expected["events"] > 0
    assert (summary["nodes"], summary["pods"]) == (expected["nodes"], expected["pods"])
    # the default store: $XDG_DATA_HOME/gpufrag/store, XDG_DATA_HOME=/data in the image
    store = data / "gpufrag" / "store"
    assert store.is_dir() and store.stat().st_uid == 10001

    # the report's charts draw with matplotlib's own DejaVu Sans: no system font is needed
    report = run_in(image, data=data, argv=["report", "--out", "/data/report.html"])
    assert report.returncode == 0, report.stderr
    assert "findfont" not in report.stderr
    assert "data:image/png;base64," in (data / "report.html").read_text(encoding="utf-8")


def test_the_image_config_is_what_the_dockerfile_declares(image: Image) -> None:
    declared: dict[str, dict[str, str]] = {"ENV": {}, "LABEL": {}}
    for ins in final_stage():
        if ins.keyword in declared:
            declared[ins.keyword] |= pairs(ins.args)
    user = next(i.args for i in final_stage() if i.keyword == "USER")
    workdir = next(i.args for i in final_stage() if i.keyword == "WORKDIR")
    volumes = next(exec_form(i.args) for i in final_stage() if i.keyword == "VOLUME")
    assert image.volumes == sorted(volumes)
    assert f"{image.uid}:{image.gid}" == user
    assert image.cwd == workdir
    env = dict(e.split("=", 1) for e in image.env)
    env.pop("TERM")  # umoci's runtime config adds it; no image config holds it
    assert env == declared["ENV"]
    assert set(image.labels) == set(declared["LABEL"])
    assert image.labels["org.opencontainers.image.version"] == VERSION
