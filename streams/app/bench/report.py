"""The bench's table and its ``--json`` file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from streams.app.bench.figures import Figure


def number(value: float | None) -> str:
    """Three significant digits, thousands grouped: 0.0712, 1.15, 34.6, 1,420, 92,100."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{float(f'{value:.3g}'):,.0f}"
    return f"{value:.3g}"


def _met(figure: Figure) -> str:
    if figure.samples is None:
        return "not run"
    return {True: "yes", False: "NO", None: "-"}[figure.met]


def table(figures: Sequence[Figure], *, title: str) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col, justify in (
        ("case", "left"),
        ("figure", "left"),
        ("median", "right"),
        ("min", "right"),
        ("max", "right"),
        ("unit", "left"),
        ("baseline", "right"),
        ("ratio", "right"),
        ("target", "left"),
        ("met", "left"),
    ):
        t.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for f in figures:
        s, b = f.samples, f.baseline_samples
        t.add_row(
            f.case,
            f.name,
            number(s.median if s else None),
            number(s.low if s else None),
            number(s.high if s else None),
            f.unit,
            number(b.median if b else None),
            number(f.ratio),
            f.target or "-",
            _met(f),
        )
    return t


def baselines(figures: Sequence[Figure]) -> list[str]:
    """One line per baseline named, and the input of each figure: the table stays narrow."""
    lines = []
    for f in figures:
        said = [f"baseline: {f.baseline}"] if f.baseline else []
        params = [", ".join(f"{k} {v}" for k, v in f.params.items())] if f.params else []
        lines.append(
            f"{f.case} {f.name}: " + "; ".join(params + said + ([f.note] if f.note else []))
        )
    return lines


def print_report(figures: Sequence[Figure], *, title: str, console: Console) -> None:
    console.print(table(figures, title=title))
    for line in baselines(figures):
        console.print(line, highlight=False, markup=False)


def write_json(path: Path, figures: Sequence[Figure], *, meta: dict[str, Any]) -> None:
    """``{"meta": {...}, "cases": [one object per figure]}``; each object has ``case``,
    ``figure``, ``median``, ``min``, ``max``, ``runs``, ``unit``, ``baseline``,
    ``baseline_median``, ``ratio``, ``target``, ``met``, ``params``, ``note``."""
    body = {"meta": meta, "cases": [f.as_json() for f in figures]}
    path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
