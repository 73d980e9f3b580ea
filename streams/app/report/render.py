"""One run's report as a single self-contained HTML page.

Why self-contained: the page is attached to incidents and capacity reviews, opened from mail or
an air-gapped bastion, and archived; inline CSS and ``data:`` PNGs mean it looks the same
everywhere and never phones home. The only script is a few lines that record, on ``<body>``,
how many images decoded, so a headless browser can check the page without scraping pixels.

Every string that comes from data goes through :func:`html.escape`: run ids, node names and
signal summaries come from cluster objects that any tenant can name.
"""

from __future__ import annotations

import base64
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from streams.app.report.data import ReportData, RunInfo, SignalRow
from streams.app.report.plots import frag_plot, pending_plot, stranded_plot

FGD_CITATION = (
    "Q. Weng, L. Yang, Y. Yu, W. Wang, X. Tang, G. Yang, L. Zhang: "
    "\u201cBeware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient "
    "Descent\u201d, USENIX ATC \u201923."
)

_DASH = "\u2014"
"""Shown for a missing value, so an empty cell reads as "none" rather than as a rendering bug."""

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1d2330;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 24px 20px 8px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h1 code { font-size: 0.9em; word-break: break-all; }
h2 { font-size: 1.2em; margin: 28px 0 8px; border-bottom: 1px solid #d5d9e0; padding-bottom: 4px; }
.lede { color: #555e6e; margin: 0 0 16px; }
.box { background: #fff; border: 1px solid #d5d9e0; border-radius: 6px; padding: 14px 18px; }
.summary { display: flex; flex-wrap: wrap; gap: 12px 40px; }
.summary > div { flex: 1 1 300px; }
.summary h3 { font-size: 0.95em; margin: 0 0 6px; color: #555e6e; text-transform: uppercase;
  letter-spacing: 0.04em; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #e4e7ec;
  vertical-align: top; }
th { background: #eef0f4; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.kv th { background: none; font-weight: 500; color: #555e6e; width: 45%; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; background: #e4e7ec; }
figure { margin: 0 0 18px; background: #fff; border: 1px solid #d5d9e0; border-radius: 6px;
  padding: 10px; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { margin-top: 8px; color: #333a48; }
figcaption b { color: #1d2330; }
details { margin-top: 8px; }
summary { cursor: pointer; color: #0b5cad; }
.empty { color: #6b7384; font-style: italic; }
.open { color: #a33b00; font-weight: 600; }
footer { max-width: 1080px; margin: 24px auto 0; padding: 12px 20px 28px; color: #6b7384;
  font-size: 0.9em; border-top: 1px solid #d5d9e0; }
@media print { body { background: #fff; } figure, .box { break-inside: avoid; } }
"""

_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = document.images, loaded = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) { loaded++; }
  }
  document.body.dataset.imagesLoaded = loaded + "/" + imgs.length;
});
"""


def render_report(data: ReportData) -> str:
    """The whole page for ``data`` as one HTML string (no external resources)."""
    run = data.run
    run_id = escape(run.run_id)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>gpufrag report \u2014 run {run_id}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_SCRIPT}</script>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>gpufrag report: run <code>{run_id}</code></h1>",
        '<p class="lede">GPU fragmentation, unplaceable pending pods, stranded nodes and '
        "detections for one run.</p>",
        _summary_section(run),
        _figures_section(data),
        _whatif_section(data),
        _signal_counts_section(data.signal_counts),
        _recent_signals_section(data.recent_signals),
        "</main>",
        _footer(data.generated_at),
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)


def write_report(data: ReportData, path: Path) -> Path:
    """Render ``data`` and write it to ``path`` as UTF-8, atomically; returns ``path``.

    Written to a temporary file in the same directory and renamed over the target, so a reader
    (a web server, a browser refresh, a CI artifact upload) sees the old page or the new one,
    never half a page; a failed render leaves the old page untouched.
    """
    html = render_report(data)  # render first: a failure must not touch the file system
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(html)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(0o644)  # mkstemp makes 0600; a report is meant to be read by others
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _summary_section(run: RunInfo) -> str:
    """Run identity on the left, the run's own headline figures on the right."""
    identity = _kv_table(
        [
            ("source", run.source),
            ("mode", run.mode),
            ("policy", run.policy),
            ("seed", str(run.seed)),
            ("status", run.status),
            ("started", _format_time(run.started_at)),
        ],
        html_values={"status"},
    )
    if run.status != "finished":  # the page outlives the stderr line that said so
        identity += (
            f'<p class="open">This run did not finish ({escape(run.status)}): what is shown '
            "covers only what was stored before it stopped.</p>"
        )
    if run.summary:
        figures = _kv_table([(str(k), _format_value(v)) for k, v in run.summary.items()])
    else:
        figures = '<p class="empty">The run recorded no summary figures.</p>'
    return (
        '<section class="box summary" id="summary">'
        f"<div><h3>Run</h3>{identity}</div>"
        f"<div><h3>Key figures</h3>{figures}</div>"
        "</section>"
    )


def _kv_table(rows: Sequence[tuple[str, str]], *, html_values: Iterable[str] = ()) -> str:
    """A two-column key/value table; values named in ``html_values`` get a status badge."""
    badges = set(html_values)
    body = []
    for key, value in rows:
        shown = escape(value) if value else _DASH
        if key in badges:
            shown = f'<span class="status">{shown}</span>'
        body.append(f'<tr><th scope="row">{escape(key)}</th><td>{shown}</td></tr>')
    return f'<table class="kv">{"".join(body)}</table>'


def _figures_section(data: ReportData) -> str:
    """The three figures, each with a caption saying what it shows and why it matters."""
    frag_png = frag_plot(data.frag_series, x_label=data.x_label, x_is_time=data.x_is_time)
    pending_png = pending_plot(data.pending_by_reason)
    stranded_png = stranded_plot(data.stranded_nodes)
    against = "time" if data.x_is_time else data.x_label
    frag_caption = (
        f"<b>Fragmentation and allocation against {escape(against)}.</b> "
        "Fragmentation amount is the idle GPU capacity that the expected workload cannot use, "
        "in % of all cluster GPUs; the ratio is the same capacity in % of the idle GPUs "
        "(FGD measure). <b>Why it matters:</b> when the ratio climbs while allocation stops "
        "rising, the cluster shows free GPUs that pending jobs cannot use. On call, that is the "
        "difference between &ldquo;the cluster is full&rdquo; and &ldquo;the cluster is "
        "fragmented&rdquo;; for capacity planning, count the amount as lost capacity, not "
        "headroom."
    )
    pending_caption = (
        "<b>Unplaceable pending pods by blocking reason.</b> Pods whose request fits the "
        "cluster's free total but no single node, grouped by what rules the nodes out. "
        "<b>Why it matters:</b> the longest bar is the constraint to relax first (CPU or memory "
        "stranding, GPU model, taints, quota); buying GPUs does not help pods blocked by "
        "something else."
    )
    stranded_caption = (
        "<b>Idle GPUs on the top stranded nodes.</b> Nodes whose GPUs are free but cannot be "
        "used, labelled with the resources they lack. <b>Why it matters:</b> these are the "
        "first candidates for consolidation or reclaim, and a node that lacks CPU or memory "
        "points at pods that request too much of them next to too little GPU."
    )
    return "".join(
        [
            '<h2 id="figures">Figures</h2>',
            _figure(
                frag_png,
                "Line chart of fragmentation amount, fragmentation ratio and allocation",
                frag_caption,
                "",
            ),
            _figure(
                pending_png,
                "Bar chart of unplaceable pending pods by blocking reason",
                pending_caption,
                _pending_details(data.pending_by_reason),
            ),
            _figure(
                stranded_png,
                "Bar chart of idle GPUs on the top stranded nodes",
                stranded_caption,
                _stranded_details(data),
            ),
        ]
    )


def _whatif_section(data: ReportData) -> str:
    """Only with ``report --whatif``: the run beside the same pods under another policy."""
    w = data.whatif
    if w is None:
        return ""
    from streams.app.report.whatif_plot import whatif_plot

    recorded = "-" if w.recorded_alloc_pct is None else f"{w.recorded_alloc_pct:.2f} %"
    caption = (
        f"<b>What-if under {escape(w.policy)}.</b> The nodes and pods this run recorded, placed "
        f"again in their recorded order under the {escape(w.policy)} policy (`gpufrag "
        f"whatif`): allocated at the end {recorded} recorded, {w.whatif_alloc_pct:.2f} % under "
        f"{escape(w.policy)}; pods that never ran {w.failed_recorded} recorded, "
        f"{w.failed_whatif} under {escape(w.policy)}. <b>Why it matters:</b> the gap is what "
        "the placement policy alone costs this cluster, on its own workload."
    )
    return "".join(
        [
            '<h2 id="whatif">What-if</h2>',
            _figure(
                whatif_plot(w),
                f"Line chart of allocation, recorded and under {w.policy}",
                caption,
                "",
            ),
        ]
    )


def _figure(png: bytes, alt: str, caption: str, details: str) -> str:
    """A ``<figure>`` with the PNG inlined as a ``data:`` URI so the page needs no other file."""
    encoded = base64.b64encode(png).decode("ascii")
    return (
        "<figure>"
        f'<img src="data:image/png;base64,{encoded}" alt="{escape(alt)}">'
        f"<figcaption>{caption}{details}</figcaption>"
        "</figure>"
    )


def _pending_details(rows: Sequence[tuple[str, int]]) -> str:
    """The chart's numbers with full reason text, which the chart may shorten."""
    if not rows:
        return ""
    ordered = sorted(rows, key=lambda rc: (-rc[1], rc[0]))
    body = "".join(
        f'<tr><td>{escape(reason)}</td><td class="num">{count:,}</td></tr>'
        for reason, count in ordered
    )
    return (
        "<details><summary>Data</summary><table>"
        '<tr><th>blocking reason</th><th class="num">pods</th></tr>'
        f"{body}</table></details>"
    )


def _stranded_details(data: ReportData) -> str:
    """The stranded nodes with full names, pools and missing resources."""
    if not data.stranded_nodes:
        return ""
    ordered = sorted(data.stranded_nodes, key=lambda n: (-n.idle_gpus, n.node))
    body = "".join(
        f"<tr><td>{escape(n.node)}</td><td>{escape(n.pool or _DASH)}</td>"
        f'<td class="num">{escape(_format_value(n.idle_gpus))}</td>'
        f"<td>{escape(', '.join(n.lacks) or _DASH)}</td></tr>"
        for n in ordered
    )
    return (
        "<details><summary>Data</summary><table>"
        '<tr><th>node</th><th>pool</th><th class="num">idle GPUs</th><th>lacks</th></tr>'
        f"{body}</table></details>"
    )


def _signal_counts_section(counts: Sequence[tuple[str, str, int]]) -> str:
    """Counts pivoted to one row per kind and one column per state, with totals.

    A pivot answers "which detections are firing and how many are still open" at a glance,
    which a long (kind, state, count) list does not.
    """
    head = '<h2 id="signal-counts">Signals by kind and state</h2>'
    if not counts:
        return head + '<p class="empty">No signals in this run.</p>'
    states = _ordered_states(state for _, state, _ in counts)
    kinds = sorted({kind for kind, _, _ in counts})
    cells: dict[tuple[str, str], int] = {}
    for kind, state, count in counts:
        cells[(kind, state)] = cells.get((kind, state), 0) + count
    header = (
        "<tr><th>kind</th>"
        + "".join(f'<th class="num">{escape(s)}</th>' for s in states)
        + '<th class="num">total</th></tr>'
    )
    rows = []
    for kind in kinds:
        values = [cells.get((kind, s), 0) for s in states]
        rows.append(
            f"<tr><td>{escape(kind)}</td>"
            + "".join(f'<td class="num">{v:,}</td>' for v in values)
            + f'<td class="num"><b>{sum(values):,}</b></td></tr>'
        )
    totals = [sum(cells.get((k, s), 0) for k in kinds) for s in states]
    rows.append(
        "<tr><th>total</th>"
        + "".join(f'<th class="num">{v:,}</th>' for v in totals)
        + f'<th class="num">{sum(totals):,}</th></tr>'
    )
    return head + f"<table>{header}{''.join(rows)}</table>"


def _ordered_states(states: Iterable[str]) -> list[str]:
    """Open before resolved (what on-call looks at first), then any other state by name."""
    first = {"open": 0, "opened": 0, "firing": 0, "active": 0, "resolved": 1, "closed": 1}
    return sorted(set(states), key=lambda s: (first.get(s.lower(), 2), s))


def _recent_signals_section(signals: Sequence[SignalRow]) -> str:
    """The latest detections, newest first, with still-open ones marked."""
    head = '<h2 id="recent-signals">Recent signals</h2>'
    if not signals:
        return head + '<p class="empty">No recent signals.</p>'
    ordered = sorted(signals, key=lambda s: _sort_key(s.opened_at), reverse=True)
    rows = []
    for s in ordered:
        resolved = (
            escape(_format_time(s.resolved_at))
            if s.resolved_at is not None
            else '<span class="open">open</span>'
        )
        rows.append(
            f'<tr><td class="num">{escape(_format_time(s.opened_at))}</td>'
            f'<td class="num">{resolved}</td>'
            f"<td>{escape(s.kind)}</td><td>{escape(s.scope_id)}</td>"
            f"<td>{escape(s.summary)}</td></tr>"
        )
    return (
        head + "<table><tr><th>opened</th><th>resolved</th><th>kind</th><th>scope</th>"
        f"<th>summary</th></tr>{''.join(rows)}</table>"
    )


def _footer(generated_at: datetime) -> str:
    """When the page was made, and where the fragmentation measure comes from."""
    return (
        "<footer>"
        f"<p>Generated by gpufrag at {escape(_format_time(generated_at))}.</p>"
        "<p>Fragmentation follows the FGD measure: for each node, the expected amount of its "
        "idle GPU that a typical pod cannot use, weighted by how often each typical pod shape "
        f"occurs. {escape(FGD_CITATION)}</p>"
        "</footer>"
    )


def _format_time(moment: datetime) -> str:
    """Seconds precision; aware times in UTC, so rows from different sources line up."""
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _sort_key(moment: datetime) -> float:
    """Orders naive and aware times together (naive read as UTC) instead of raising."""
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def _format_value(value: object) -> str:
    """A summary value as a person reads it: grouped integers, two decimals, readable lists."""
    if value is None:
        return _DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.0f}"
        if abs(value) >= 0.01:
            return f"{value:,.2f}"
        return f"{value:.3g}"
    if isinstance(value, datetime):
        return _format_time(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)
