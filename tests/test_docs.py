"""The docs a newcomer reads stay short, complete and linked: README.md under 200 lines, a
README.md in every package with code, an index line for every page in docs/, and no relative
link to a file that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE_ROOTS = ("models", "connectors", "streams")
README_MAX_LINES = 200

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def packages_with_code() -> list[Path]:
    """Each top-level package and each package directly inside one, when it holds a module
    besides ``__init__.py``."""
    out = []
    for name in CODE_ROOTS:
        top = ROOT / name
        for pkg in [top, *sorted(p.parent for p in top.glob("*/__init__.py"))]:
            if any(p.name != "__init__.py" for p in pkg.glob("*.py")):
                out.append(pkg)
    return out


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    for name in (*CODE_ROOTS, "sql", "deploy"):
        files += sorted((ROOT / name).rglob("README.md"))
    return [f for f in files if f.exists()]


def relative_links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", path.read_text()))
    targets = (m.group(1) for m in LINK.finditer(text))
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_every_package_with_code_has_a_readme() -> None:
    missing = [
        str(p.relative_to(ROOT)) for p in packages_with_code() if not (p / "README.md").exists()
    ]
    assert not missing, f"packages without README.md: {missing}"
    for folder in ("sql", "deploy", "docs"):
        assert (ROOT / folder / "README.md").exists(), folder


def test_docs_index_lists_every_page() -> None:
    listed = {Path(t.split("#")[0]).name for t in relative_links(ROOT / "docs" / "README.md")}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= listed, f"pages missing from docs/README.md: {sorted(pages - listed)}"


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files(path: Path) -> None:
    broken = [t for t in relative_links(path) if not (path.parent / t.split("#")[0]).exists()]
    assert not broken, f"{path.relative_to(ROOT)}: links to missing files: {broken}"
