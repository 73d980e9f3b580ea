"""deploy/image/Dockerfile read as instructions, and the package list build.sh reads.

No container engine is at hand to build the Dockerfile, so it is checked by reading: enough of
the format for this file (comments, continuation lines, KEY=value and KEY="value" pairs, JSON
arrays), not all of it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.paths import REPO_ROOT

DOCKERFILE = REPO_ROOT / "deploy" / "image" / "Dockerfile"
PACKAGES = REPO_ROOT / "deploy" / "image" / "packages.txt"


@dataclass(frozen=True, kw_only=True)
class Instruction:
    keyword: str
    """Upper case: FROM, RUN, ..."""
    args: str
    """The rest, continuation lines joined."""
    stage: int
    """0 for the first FROM's stage, 1 for the next, ..."""


def instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    found: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = pending + line
        pending = ""
        keyword, _, args = whole.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        found.append(Instruction(keyword=keyword.upper(), args=args.strip(), stage=stage))
    return found


def final_stage(path: Path = DOCKERFILE) -> list[Instruction]:
    every = instructions(path)
    last = max(i.stage for i in every)
    return [i for i in every if i.stage == last]


def pairs(args: str) -> dict[str, str]:
    """ENV's and LABEL's ``KEY=value`` pairs (values possibly quoted)."""
    return dict(word.split("=", 1) for word in shlex.split(args))


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def apt_packages(run_args: str) -> list[str]:
    """The packages an ``apt-get install`` in a RUN names (options left out)."""
    match = re.search(r"apt-get install (.*?)(?:&&|$)", run_args)
    assert match, f"no apt-get install in: {run_args}"
    return [w for w in shlex.split(match.group(1)) if not w.startswith("-")]


def listed_packages(path: Path = PACKAGES) -> list[str]:
    """packages.txt as build.sh reads it: one a line, # comments and blank lines left out."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


BASE = re.compile(r"^debian:bookworm-\d{8}-slim(?: AS \w+)?$", re.IGNORECASE)
"""A dated Debian tag: `bookworm-slim` moves every few weeks, a dated tag does not."""

SECRET_NAME = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|KEY|CREDENTIAL", re.IGNORECASE)


def _secret_problems(every: list[Instruction]) -> list[str]:
    found = []
    for ins in every:
        if ins.keyword in ("ENV", "ARG"):
            names = pairs(ins.args) if "=" in ins.args else {ins.args: ""}
            found += [
                f"{ins.keyword} {name}: a secret's name in the image's build or environment"
                for name in names
                if SECRET_NAME.search(name)
            ]
        if ins.keyword in ("COPY", "ADD") and re.search(r"(^|[\s/])\.env\b", ins.args):
            found.append(f"{ins.keyword} {ins.args}: copies a .env file")
    return found


def problems(path: Path = DOCKERFILE, packages: Path = PACKAGES) -> list[str]:
    """What the Dockerfile gets wrong of the image's rules; empty when nothing."""
    every = instructions(path)
    last = final_stage(path)
    found = [
        f"FROM {i.args}: not a Debian bookworm slim image pinned by a dated tag"
        for i in every
        if i.keyword == "FROM" and not BASE.match(i.args)
    ]
    users = [i.args for i in last if i.keyword == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]):
        found.append(f"USER {users[-1] if users else '(none)'}: not a numeric non-root uid:gid")
    found += _secret_problems(every)
    installs = [apt_packages(i.args) for i in last if i.keyword == "RUN" and "apt-get" in i.args]
    if sorted(p for pkgs in installs for p in pkgs) != sorted(listed_packages(packages)):
        found.append(
            f"the runtime stage installs {installs}, packages.txt lists {listed_packages(packages)}"
        )
    entry = [exec_form(i.args) for i in last if i.keyword == "ENTRYPOINT"]
    if entry != [["gpufrag"]]:
        found.append(f"ENTRYPOINT {entry}: not exactly ['gpufrag']")
    return found
