"""The Dockerfile, read (no container engine here builds it): its base, user, secrets, packages
and pins agree with the rules and with build.sh, the build the other tests run."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from tests.deploy.dockerfile import (
    DOCKERFILE,
    PACKAGES,
    final_stage,
    instructions,
    pairs,
    problems,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.deploy

IMAGE_DIR = REPO_ROOT / "deploy" / "image"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_dockerfile_breaks_none_of_the_rules() -> None:
    assert problems() == []


MUTATIONS = {
    "floating-tag": ("FROM debian:bookworm-20260202-slim\n", "FROM debian:bookworm-slim\n"),
    "root-user": ("USER 10001:10001", "USER root"),
    "uid-0": ("USER 10001:10001", "USER 0:0"),
    "token-env": ("ARG CREATED=unknown", "ARG CREATED=unknown\nENV SLACK_TOKEN=xoxb-1"),
    "password-arg": ("ARG CREATED=unknown", "ARG REGISTRY_PASSWORD"),
    "dotenv-copy": ("COPY . /src", "COPY . /src\nCOPY .env /src/.env"),
    "extra-package": ("python3 ca-certificates", "python3 ca-certificates curl"),
    "shell-entrypoint": ('ENTRYPOINT ["gpufrag"]', 'ENTRYPOINT ["sh", "-c", "gpufrag"]'),
}
"""Each a change that breaks one rule: (text in the Dockerfile, what replaces it)."""

CAUGHT_BY = {
    "floating-tag": "pinned by a dated tag",
    "root-user": "non-root",
    "uid-0": "non-root",
    "token-env": "SLACK_TOKEN",
    "password-arg": "REGISTRY_PASSWORD",
    "dotenv-copy": "copies a .env",
    "extra-package": "packages.txt lists",
    "shell-entrypoint": "ENTRYPOINT",
}
"""What the problem found says for each of MUTATIONS."""


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_rule_catches_what_it_is_for(tmp_path: Path, name: str) -> None:
    old, new = MUTATIONS[name]
    needle = CAUGHT_BY[name]
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert old in text
    bad = tmp_path / "Dockerfile"
    bad.write_text(text.replace(old, new, 1), encoding="utf-8")
    found = problems(bad, PACKAGES)
    assert any(needle in problem for problem in found), found


def test_both_stages_start_from_the_same_base_and_the_runtime_copies_only_the_venv() -> None:
    bases = {i.args.split()[0] for i in instructions() if i.keyword == "FROM"}
    assert len(bases) == 1
    assert len([i for i in instructions() if i.keyword == "FROM"]) == 2
    copies = [i.args for i in final_stage() if i.keyword in ("COPY", "ADD")]
    assert copies == ["--from=build /opt/gpufrag /opt/gpufrag"]


def test_the_dockerfile_pins_the_pip_that_build_sh_uses() -> None:
    build_sh = (IMAGE_DIR / "build.sh").read_text(encoding="utf-8")
    pinned = re.search(r"^PIP_VERSION=(\S+)", build_sh, re.MULTILINE)
    assert pinned
    assert f"pip=={pinned.group(1)}" in DOCKERFILE.read_text(encoding="utf-8")


def test_labels_are_oci_ones_and_say_this_version() -> None:
    labels: dict[str, str] = {}
    for ins in final_stage():
        if ins.keyword == "LABEL":
            labels |= pairs(ins.args)
    assert labels, "no LABEL"
    assert all(k.startswith("org.opencontainers.image.") for k in labels), labels
    assert labels["org.opencontainers.image.version"] == PYPROJECT["project"]["version"]
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _runtime_closure() -> set[str]:
    """The distributions the project's runtime dependencies pull in, as installed here."""
    todo = [_name(d) for d in PYPROJECT["project"]["dependencies"]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_the_lock_pins_every_runtime_dependency_exactly_and_no_test_tool() -> None:
    lines = (IMAGE_DIR / "requirements.lock").read_text(encoding="utf-8").splitlines()
    pins = [line for line in lines if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", pin) for pin in pins), pins
    locked = {_name(pin) for pin in pins}
    assert {_name(d) for d in PYPROJECT["project"]["dependencies"]} <= locked
    tools = {_name(d) for d in PYPROJECT["project"]["optional-dependencies"]["test"]}
    # a test extra that a runtime dependency needs anyway (PyYAML, through kubernetes-asyncio)
    # is in the image for that reason, not as a test tool
    assert not (tools & locked) - _runtime_closure()
