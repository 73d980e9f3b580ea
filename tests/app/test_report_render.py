"""The HTML report without a browser: structure, inlined PNGs, escaping, determinism.

Fast checks that run everywhere; ``test_report_browser.py`` checks that a real browser loads
the same page. The data builders here are shared with that module.
"""

from __future__ import annotations

import base64
import math
import re
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streams.app.report import (
    FragPoint,
    ReportData,
    RunInfo,
    SignalRow,
    StrandedNode,
    render_report,
    write_report,
)
from streams.app.report.plots import frag_plot, no_data_png, pending_plot, stranded_plot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DATA_URI = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
STARTED = datetime(2024, 5, 17, 9, 30, tzinfo=UTC)
HOSTILE_RUN_ID = "<script>alert(1)</script>"


def make_report_data(*, x_is_time: bool, run_id: str = "run-42") -> ReportData:
    """A plausible run: an FGD-protocol curve (demand x) or a replay timeline (time x)."""
    if x_is_time:
        start = STARTED.timestamp()
        series = tuple(
            FragPoint(
                x=start + 600.0 * i,
                frag_amount_pct=4.0 + 6.0 * math.sin(i / 9.0) ** 2,
                frag_ratio_pct=15.0 + 40.0 * i / 144,
                alloc_pct=30.0 + 55.0 * i / 144,
            )
            for i in range(145)  # one day in 10-minute steps
        )
        x_label = "time"
    else:
        series = tuple(
            FragPoint(
                x=float(level),
                frag_amount_pct=min(level, 100) * 0.12,
                frag_ratio_pct=12.0 + 0.6 * level,
                alloc_pct=min(level * 0.9, 88.0),
            )
            for level in range(0, 131, 5)
        )
        x_label = "arrived GPU demand (% of capacity)"
    run = RunInfo(
        run_id=run_id,
        source="alibaba-gpu-v2023/openb_pod_list_default",
        mode="timeline" if x_is_time else "fgd",
        policy="fgd",
        seed=42,
        status="finished",
        started_at=STARTED,
        summary={
            "final_frag_ratio_pct": 63.4521,
            "final_frag_amount_pct": 7.126,
            "pods_bound": 8123,
            "pods_failed": 29,
            "time_compression": None if not x_is_time else 1000.0,
            "note": 'cost < $5 & "quoted"',
        },
    )
    return ReportData(
        run=run,
        x_label=x_label,
        x_is_time=x_is_time,
        frag_series=series,
        pending_by_reason=(
            ("Insufficient cpu", 14),
            ("Insufficient nvidia.com/gpu", 31),
            ("node(s) didn't match Pod's node affinity/selector", 6),
            ("node(s) had untolerated taint {gpu: a100-reserved}", 3),
            ("GPU model not allowed (gpu_spec=V100M16|V100M32)", 9),
        ),
        stranded_nodes=tuple(
            StrandedNode(
                node=f"gpu-node-{i:03d}",
                pool="a100-pool" if i % 2 else None,
                idle_gpus=8.0 - i * 0.5,
                lacks=("cpu", "memory") if i % 3 == 0 else ("cpu",),
            )
            for i in range(10)
        ),
        signal_counts=(
            ("fragmentation", "open", 2),
            ("fragmentation", "resolved", 5),
            ("oom_storm", "resolved", 1),
            ("unplaceable_pending", "open", 4),
        ),
        recent_signals=(
            SignalRow(
                opened_at=STARTED + timedelta(hours=3),
                resolved_at=None,
                kind="fragmentation",
                scope_id="pool/a100-pool",
                summary="fragmentation ratio 63% above 50% for 20 min",
            ),
            SignalRow(
                opened_at=STARTED + timedelta(hours=1),
                resolved_at=STARTED + timedelta(hours=1, minutes=12),
                kind="oom_storm",
                scope_id="node/gpu-node-007",
                summary="7 OOM kills in 60 s on GPU 3 <time-sliced>",
            ),
        ),
        generated_at=STARTED + timedelta(days=1),
    )


def make_empty_report_data() -> ReportData:
    """A run that recorded nothing at all: every section must still render."""
    return ReportData(
        run=RunInfo(
            run_id="empty-run",
            source="",
            mode="fgd",
            policy="random",
            seed=0,
            status="failed",
            started_at=datetime(2024, 1, 1),  # naive on purpose
            summary={},
        ),
        x_label="arrived GPU demand (% of capacity)",
        x_is_time=False,
        frag_series=(),
        pending_by_reason=(),
        stranded_nodes=(),
        signal_counts=(),
        recent_signals=(),
        generated_at=datetime(2024, 1, 1, 1),
    )


def inline_pngs(html: str) -> list[bytes]:
    """The decoded ``data:`` PNGs of the page, in document order."""
    return [base64.b64decode(m, validate=True) for m in DATA_URI.findall(html)]


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which must come first in a valid PNG."""
    assert png[:8] == PNG_SIGNATURE
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def assert_valid_png(png: bytes) -> None:
    assert png[:8] == PNG_SIGNATURE, png[:16]
    assert len(png) > 1024, len(png)
    assert png.endswith(b"IEND\xaeB`\x82")
    width, height = png_size(png)
    assert width >= 400 and height >= 100, (width, height)


CASES = {
    "demand": lambda: make_report_data(x_is_time=False),
    "time": lambda: make_report_data(x_is_time=True),
    "empty": make_empty_report_data,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_page_has_exactly_three_valid_inline_pngs(case: str) -> None:
    html = render_report(CASES[case]())
    assert html.count("data:image/png;base64,") == 3
    pngs = inline_pngs(html)
    assert len(pngs) == 3
    for png in pngs:
        assert_valid_png(png)


@pytest.mark.parametrize("case", sorted(CASES))
def test_page_is_self_contained(case: str) -> None:
    html = render_report(CASES[case]())
    assert html.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in html
    assert html.count("<script>") == 1  # only the image-count script
    assert "document.body.dataset.imagesLoaded" in html
    # No external resources: no http(s) URLs, stylesheets, or src attributes other than data:.
    assert not re.search(r"https?://", html)
    assert "<link" not in html
    assert all(
        src.startswith("data:image/png;base64,") for src in re.findall(r'src="([^"]*)"', html)
    )


def test_summary_and_tables_show_the_data() -> None:
    data = make_report_data(x_is_time=False)
    html = render_report(data)
    assert "<title>gpufrag report \u2014 run run-42</title>" in html
    for text in ("alibaba-gpu-v2023/openb_pod_list_default", ">fgd<", ">42<", "finished"):
        assert text in html, text
    assert "2024-05-17 09:30:00 UTC" in html  # started_at
    for key, shown in (
        ("final_frag_ratio_pct", "63.45"),
        ("final_frag_amount_pct", "7.13"),
        ("pods_bound", "8,123"),
        ("pods_failed", "29"),
    ):
        assert re.search(rf"<th[^>]*>{key}</th><td>{re.escape(shown)}</td>", html), key
    assert "cost &lt; $5 &amp; &quot;quoted&quot;" in html  # summary strings are escaped
    # Signal counts pivoted by kind and state, open first, with totals.
    assert '<th class="num">open</th><th class="num">resolved</th>' in html
    assert '<td>unplaceable_pending</td><td class="num">4</td><td class="num">0</td>' in html
    assert '<th class="num">12</th></tr>' in html  # grand total
    # Recent signals: newest first, open one marked, summaries escaped.
    assert html.index("pool/a100-pool") < html.index("node/gpu-node-007")
    assert '<span class="open">open</span>' in html
    assert "GPU 3 &lt;time-sliced&gt;" in html
    # Full reasons and stranded node data, which the charts may shorten.
    assert "node(s) had untolerated taint {gpu: a100-reserved}" in html
    assert "Insufficient nvidia.com/gpu" in html
    assert "gpu-node-000" in html and "cpu, memory" in html
    # Footer: generation time and the FGD citation.
    assert "Generated by gpufrag at 2024-05-18 09:30:00 UTC" in html
    assert "Beware of Fragmentation" in html and "USENIX ATC" in html and "Weng" in html
    assert html.count("<figcaption>") == 3
    assert html.count("Why it matters:") == 3


def test_run_id_and_data_text_are_escaped() -> None:
    html = render_report(make_report_data(x_is_time=False, run_id=HOSTILE_RUN_ID))
    assert HOSTILE_RUN_ID not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1
    assert "alert(1)</script>" not in html


def test_empty_report_says_so() -> None:
    html = render_report(make_empty_report_data())
    assert "No signals in this run." in html
    assert "No recent signals." in html
    assert "The run recorded no summary figures." in html
    assert "2024-01-01 00:00:00" in html  # naive time shown as is


def test_time_report_labels_time_axis() -> None:
    html = render_report(make_report_data(x_is_time=True))
    assert "against time." in html
    assert ">timeline<" in html


@pytest.mark.parametrize("case", sorted(CASES))
def test_plots_are_deterministic(case: str) -> None:
    data = CASES[case]()
    first = (
        frag_plot(data.frag_series, x_label=data.x_label, x_is_time=data.x_is_time),
        pending_plot(data.pending_by_reason),
        stranded_plot(data.stranded_nodes),
    )
    second = (
        frag_plot(data.frag_series, x_label=data.x_label, x_is_time=data.x_is_time),
        pending_plot(data.pending_by_reason),
        stranded_plot(data.stranded_nodes),
    )
    assert first == second
    assert render_report(data) == render_report(data)


def test_pngs_carry_no_software_or_time_metadata() -> None:
    data = make_report_data(x_is_time=True)
    for png in inline_pngs(render_report(data)):
        assert b"tEXt" not in png and b"iTXt" not in png and b"tIME" not in png
        assert b"matplotlib" not in png.lower()


def test_plots_survive_awkward_input() -> None:
    """Never crash on odd data: a report is most needed when the data is strange."""
    weird = (
        FragPoint(x=float("nan"), frag_amount_pct=1.0, frag_ratio_pct=1.0, alloc_pct=1.0),
        FragPoint(x=5.0, frag_amount_pct=0.0, frag_ratio_pct=float("nan"), alloc_pct=100.0),
    )
    assert_valid_png(frag_plot(weird, x_label="demand $x$ (%)", x_is_time=False))
    assert_valid_png(frag_plot(weird, x_label="time", x_is_time=True))  # 5 s after the epoch
    assert_valid_png(
        frag_plot(
            (FragPoint(x=1e300, frag_amount_pct=1.0, frag_ratio_pct=1.0, alloc_pct=1.0),),
            x_label="time",
            x_is_time=True,
        )
    )
    many = tuple((f"reason {i} costs $1 and $2 " + "x" * 80, i + 1) for i in range(40))
    assert_valid_png(pending_plot(many))
    assert_valid_png(pending_plot((("zero", 0),)))
    nodes = (
        StrandedNode(node="n$1$", pool="p", idle_gpus=0.25, lacks=()),
        StrandedNode(node="nan", pool=None, idle_gpus=float("nan"), lacks=("cpu",)),
    )
    assert_valid_png(stranded_plot(nodes))
    assert_valid_png(no_data_png("t"))


def test_write_report_is_atomic_utf8(tmp_path: Path) -> None:
    data = make_report_data(x_is_time=False, run_id="r\u00e9sum\u00e9-\u2603")
    target = tmp_path / "sub" / "report.html"
    assert write_report(data, target) == target
    text = target.read_text(encoding="utf-8")
    assert text == render_report(data)
    assert "r\u00e9sum\u00e9-\u2603" in text
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]  # no temp left
    assert target.stat().st_mode & 0o777 == 0o644
    # Overwriting replaces the whole file.
    write_report(make_empty_report_data(), target)
    assert "empty-run" in target.read_text(encoding="utf-8")
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]


def test_write_report_leaves_old_page_when_render_fails(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old page", encoding="utf-8")
    broken = make_report_data(x_is_time=False)
    object.__setattr__(broken, "recent_signals", (None,))  # not a SignalRow: render raises
    with pytest.raises(AttributeError):
        write_report(broken, target)
    assert target.read_text(encoding="utf-8") == "old page"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_data_is_frozen_and_keyword_only() -> None:
    point = FragPoint(x=1.0, frag_amount_pct=2.0, frag_ratio_pct=3.0, alloc_pct=4.0)
    with pytest.raises(AttributeError):
        point.x = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        FragPoint(1.0, 2.0, 3.0, 4.0)  # type: ignore[call-arg]
    assert not hasattr(point, "__dict__")  # slots


def test_rendering_leaves_global_matplotlib_state_alone() -> None:
    """Other code may rely on pyplot or another backend; rendering must not import or switch it."""
    code = (
        "import sys, matplotlib\n"
        "matplotlib.use('svg')\n"
        "before = dict(matplotlib.rcParams)\n"
        "from tests.app.test_report_render import make_report_data\n"
        "from streams.app.report import render_report\n"
        "render_report(make_report_data(x_is_time=True))\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert dict(matplotlib.rcParams) == before\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
