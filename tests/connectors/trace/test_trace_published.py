"""The published-results reader (``experiment --published``) on files it cannot use: each is one
PublishedResultsError naming the file, never a codecs or csv exception."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from connectors.trace.published import PublishedResultsError, read_published
from models import TraceSettings
from tests.paths import PUBLISHED_DIR

ALLOC = "analysis_allo_discrete.csv"


@pytest.fixture
def published(tmp_path: Path) -> Path:
    for f in PUBLISHED_DIR.glob("*.csv"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _read(directory: Path, settings: TraceSettings | None = None) -> None:
    read_published(
        directory, workload="openb_pod_list_default", policy="fgd", seeds={42}, settings=settings
    )


def test_the_shipped_files_read(published: Path) -> None:
    _read(published)


def test_binary_file(published: Path) -> None:
    (published / ALLOC).write_bytes(bytes(range(128, 256)) * 10)
    with pytest.raises(PublishedResultsError, match=f"^{ALLOC}: not valid UTF-8"):
        _read(published)


def test_value_that_is_not_finite(published: Path) -> None:
    path = published / ALLOC
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[header.index("7")] = "1e999"
    path.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    with pytest.raises(PublishedResultsError, match=r"column '7': not a finite number: '1e999'"):
        _read(published)


def test_file_over_the_size_cap(published: Path) -> None:
    size = max(f.stat().st_size for f in published.glob("*.csv"))
    with pytest.raises(PublishedResultsError, match="over the 1000-byte limit"):
        _read(published, TraceSettings(max_file_bytes=1000))
    _read(published, TraceSettings(max_file_bytes=size))


def test_field_past_the_csv_limit(published: Path) -> None:
    path = published / ALLOC
    path.write_text(path.read_text().splitlines()[0] + '\n"' + "x" * 200_000 + '"\n')
    with pytest.raises(PublishedResultsError, match=f"^{ALLOC}: malformed CSV: field larger"):
        _read(published)
