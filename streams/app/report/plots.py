"""The report's figures, each rendered to PNG bytes.

Why these choices:

- ``Figure`` + ``FigureCanvasAgg`` directly, never ``pyplot``: pyplot keeps a global figure
  registry and picks a backend process-wide, which would leak figures in a long-running service
  and could fight with other code (a notebook, a GUI) that relies on another backend.
- Fixed size, dpi and fonts, and ``metadata={"Software": None}``: the same data gives the same
  bytes, so reports can be diffed, cached and tested byte-for-byte.
- Every function returns a readable "no data" picture for empty input instead of raising or
  returning an empty image: a report about a quiet cluster is still a report.
- Text that comes from data goes through :func:`_plain` so a ``$`` in a node name or a blocking
  reason cannot switch matplotlib into mathtext and crash the render.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from streams.app.report.data import FragPoint, StrandedNode

DPI = 100
"""Pixels per inch of every figure; fixed so the output does not depend on rcParams."""

WIDTH_IN = 10.0
"""Figure width in inches (1000 px at ``DPI``), wide enough for long reason labels."""

MAX_BARS = 20
"""Most bars in one chart; more would be unreadable, and the tail is summarised instead."""

MAX_LABEL = 48
"""Longest tick label in characters before it is shortened with an ellipsis."""

_MIN_POSIX_S = -62_135_596_800.0  # 0001-01-01T00:00:00Z: datetime's range, for time x values
_MAX_POSIX_S = 253_402_300_800.0  # 10000-01-01T00:00:00Z

FONT_SIZE = 10.0
TITLE_SIZE = 12.0

PNG_METADATA: dict[str, str | None] = {"Software": None}
"""No software version in the file: upgrading matplotlib must not change report bytes."""

# Colour-blind-safe (Okabe-Ito) colours, fixed so the figures do not depend on the style in use.
_AMOUNT = "#D55E00"
_RATIO = "#CC79A7"
_ALLOC = "#0072B2"
_PENDING = "#E69F00"
_STRANDED = "#009E73"


def frag_plot(points: Sequence[FragPoint], *, x_label: str, x_is_time: bool) -> bytes:
    """Fragmentation amount, ratio and allocation against demand or time, as PNG.

    Amount and allocation share the left axis (% of cluster GPUs) so that "what is used" and
    "what is idle but unusable" read against the same capacity; the ratio has its own right axis
    (% of idle GPUs) because its denominator shrinks as the cluster fills.
    """
    title = "GPU fragmentation and allocation"
    usable = sorted((p for p in points if _plottable_x(p.x, x_is_time)), key=lambda p: p.x)
    if not usable:
        return no_data_png(title)
    xs = [_date_num(p.x) if x_is_time else p.x for p in usable]
    marker = "o" if len(usable) <= 40 else None

    fig = _figure(5.2)
    ax = fig.add_subplot()
    right = ax.twinx()
    lines = [
        *ax.plot(
            xs,
            [p.alloc_pct for p in usable],
            color=_ALLOC,
            linewidth=2.0,
            marker=marker,
            markersize=3,
            label="allocation (% of cluster GPUs, left)",
        ),
        *ax.plot(
            xs,
            [p.frag_amount_pct for p in usable],
            color=_AMOUNT,
            linewidth=2.0,
            marker=marker,
            markersize=3,
            label="fragmentation amount (% of cluster GPUs, left)",
        ),
        *right.plot(
            xs,
            [p.frag_ratio_pct for p in usable],
            color=_RATIO,
            linewidth=1.6,
            linestyle="--",
            marker=marker,
            markersize=3,
            label="fragmentation ratio (% of idle GPUs, right)",
        ),
    ]
    left_values = _finite(v for p in usable for v in (p.alloc_pct, p.frag_amount_pct))
    ax.set_ylim(0.0, max([100.0, *left_values]) * 1.05)
    right.set_ylim(0.0, max([100.0, *_finite(p.frag_ratio_pct for p in usable)]) * 1.05)
    ax.set_ylabel("% of cluster GPUs", fontsize=FONT_SIZE)
    right.set_ylabel("% of idle GPUs", fontsize=FONT_SIZE, color=_RATIO)
    right.tick_params(axis="y", labelsize=FONT_SIZE, colors=_RATIO)
    ax.tick_params(labelsize=FONT_SIZE)
    ax.grid(True, color="#dddddd", linewidth=0.6)

    if x_is_time:
        # matplotlib.dates ships without annotations on these; the calls are plain constructors.
        locator = mdates.AutoDateLocator(tz=UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        formatter = mdates.ConciseDateFormatter(locator, tz=UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(formatter)
        label = x_label if "UTC" in x_label else f"{x_label} (UTC)"
    else:
        label = x_label
    if xs[0] == xs[-1]:
        pad = 1.0 / 24.0 if x_is_time else 1.0  # one sample: an hour, or one point, of margin
        ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    ax.set_xlabel(_plain(label), fontsize=FONT_SIZE)
    ax.set_title(title, fontsize=TITLE_SIZE)
    # Below the axes, not inside: a rising allocation line must never hide behind the legend.
    fig.legend(
        handles=lines,
        loc="outside lower center",
        ncols=3,
        fontsize=FONT_SIZE - 1,
        frameon=False,
    )
    return _png(fig)


def pending_plot(pending_by_reason: Sequence[tuple[str, int]]) -> bytes:
    """Unplaceable pending pods per blocking reason, largest first, as PNG.

    The largest bar is the constraint to relax first; reasons beyond :data:`MAX_BARS` are summed
    into one "other" bar so the total stays honest.
    """
    title = "Unplaceable pending pods by blocking reason"
    rows = sorted(
        ((reason, count) for reason, count in pending_by_reason if count > 0),
        key=lambda rc: (-rc[1], rc[0]),
    )
    if not rows:
        return no_data_png(title, "no data: no unplaceable pending pods")
    if len(rows) > MAX_BARS:
        rest = rows[MAX_BARS - 1 :]
        rows = [*rows[: MAX_BARS - 1], (f"other ({len(rest)} reasons)", sum(c for _, c in rest))]
    labels = [_short(reason) for reason, _ in rows]
    values = [float(count) for _, count in rows]
    fig = _figure(_bar_height(len(rows)))
    ax = fig.add_subplot()
    bars = ax.barh(range(len(rows)), values, color=_PENDING)
    ax.bar_label(bars, labels=[f"{c:,}" for _, c in rows], padding=3, fontsize=FONT_SIZE - 1)
    _bar_axes(ax, labels, max(values))
    ax.set_xlabel("unplaceable pending pods (count)", fontsize=FONT_SIZE)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return _png(fig)


def stranded_plot(nodes: Sequence[StrandedNode]) -> bytes:
    """Idle GPUs on the top stranded nodes, each bar labelled with what the node lacks, as PNG.

    The label is the actionable part: a node lacking CPU or memory needs its CPU-heavy pods moved,
    one lacking nothing obvious points at taints, model or quota instead.
    """
    title = "Idle GPUs on the top stranded nodes"
    rows = sorted(
        (n for n in nodes if math.isfinite(n.idle_gpus) and n.idle_gpus > 0),
        key=lambda n: (-n.idle_gpus, n.node),
    )[:MAX_BARS]
    if not rows:
        return no_data_png(title, "no data: no stranded nodes")
    labels = [_short(n.node if n.pool is None else f"{n.node} ({n.pool})") for n in rows]
    values = [n.idle_gpus for n in rows]
    fig = _figure(_bar_height(len(rows)))
    ax = fig.add_subplot()
    bars = ax.barh(range(len(rows)), values, color=_STRANDED)
    notes = [
        f"{n.idle_gpus:g} idle, lacks {', '.join(n.lacks) if n.lacks else 'n/a'}" for n in rows
    ]
    ax.bar_label(bars, labels=[_plain(s) for s in notes], padding=3, fontsize=FONT_SIZE - 1)
    # Room on the right for the "lacks ..." notes, which are longer than a count.
    _bar_axes(ax, labels, max(values), headroom=1.9)
    ax.set_xlabel("idle GPUs that cannot be used (GPUs)", fontsize=FONT_SIZE)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return _png(fig)


def no_data_png(title: str, message: str = "no data") -> bytes:
    """A small titled picture saying there is nothing to show.

    An explicit picture beats a missing one: the reader sees that the section was rendered and
    empty, rather than wondering whether the report broke.
    """
    fig = _figure(2.2)
    fig.text(0.5, 0.72, _plain(title), ha="center", va="center", fontsize=TITLE_SIZE)
    fig.text(
        0.5,
        0.38,
        _plain(message),
        ha="center",
        va="center",
        fontsize=FONT_SIZE + 4,
        color="#666666",
        style="italic",
    )
    fig.patches.append(_frame(fig))
    return _png(fig)


def _plottable_x(x: float, x_is_time: bool) -> bool:
    """Finite, and for time a POSIX second that ``datetime`` can represent (years 1..9999)."""
    return math.isfinite(x) and (not x_is_time or _MIN_POSIX_S <= x < _MAX_POSIX_S)


def _date_num(posix_s: float) -> float:
    """POSIX seconds as matplotlib's date number, honouring whatever date epoch is configured."""
    moment = datetime.fromtimestamp(posix_s, tz=UTC)
    return float(mdates.date2num(moment))  # type: ignore[no-untyped-call]


def _figure(height_in: float) -> Figure:
    """A figure on the Agg canvas with fixed size and dpi, independent of rcParams."""
    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    """Render to PNG without software/version metadata so bytes depend only on the data."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=PNG_METADATA, facecolor="white")
    return buf.getvalue()


def _frame(fig: Figure) -> Rectangle:
    """A light border so the "no data" picture reads as a figure slot, not as page whitespace."""
    return Rectangle(
        (0.005, 0.01),
        0.99,
        0.98,
        transform=fig.transFigure,
        fill=False,
        edgecolor="#cccccc",
        linewidth=1.0,
    )


def _bar_height(bars: int) -> float:
    """Figure height that gives each bar the same room however many there are."""
    return 1.4 + 0.32 * max(bars, 2)


def _bar_axes(ax: Axes, labels: list[str], top: float, *, headroom: float = 1.15) -> None:
    """Shared layout of the horizontal bar charts: first row on top, room for value labels."""
    ax.set_yticks(range(len(labels)), labels=labels, fontsize=FONT_SIZE)
    ax.invert_yaxis()
    ax.set_xlim(0.0, top * headroom)
    ax.tick_params(axis="x", labelsize=FONT_SIZE)
    ax.grid(True, axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)


def _finite(values: Iterable[float]) -> list[float]:
    """The finite values; a NaN ratio (no idle GPU) must not turn the axis limits into NaN."""
    return [float(v) for v in values if math.isfinite(v)]


def _short(text: str) -> str:
    """A tick label short enough not to squeeze the bars; the page's data table has it whole."""
    text = " ".join(text.split())
    if len(text) > MAX_LABEL:
        text = text[: MAX_LABEL - 1] + "\u2026"
    return _plain(text)


def _plain(text: str) -> str:
    """Text that matplotlib draws literally: ``$`` would otherwise start mathtext."""
    return text.replace("$", r"\$")
