"""What a page costs is bounded: every line is read in time linear in its length (a line of
100,000 labels once took seconds, a 10 MB page of them minutes), a long line in an uncommon
form is refused without the quadratic parser, and a page that is mostly unreadable is given up
after REFUSED_LINES_MAX refusals instead of one refusal per line for millions of lines.

Speed itself is not asserted here (the machine may be busy); the bounds are."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from connectors.dcgm.exposition import read_lines
from connectors.dcgm.fast_line import SLOW_PARSE_MAX_CHARS, Parsed, parse_common
from connectors.dcgm.samples import REFUSED_LINES_MAX
from tests.connectors.dcgm.helpers import FIXTURES, parse

H200 = 'gpu="0",UUID="GPU-x",modelName="NVIDIA H200",Hostname="n1"'


def prometheus(text: str) -> Parsed:
    (sample,) = [s for f in text_string_to_metric_families(text) for s in f.samples]
    stamp = None if sample.timestamp is None else float(sample.timestamp)
    return sample.name, dict(sample.labels), sample.value, stamp


def _lines(*, malformed: bool) -> list[str]:
    return [
        line.strip()
        for path in sorted(FIXTURES.glob("*.txt"))
        if malformed or "malformed" not in path.name
        for line in path.read_text(errors="replace").split("\n")
        if line.strip() and not line.startswith("#")
    ]


FIXTURE_LINES = _lines(malformed=True)
EDGE_LINES = [
    "up 1",
    "up\t1\t1700000000000",
    "DCGM_FI_DEV_FB_USED{} 5",
    'DCGM_FI_DEV_FB_USED{gpu="0",} 5',
    'DCGM_FI_DEV_FB_USED { gpu = "0" , Hostname="n1"} 5 1700000000123',
    'DCGM_FI_DEV_FB_USED{a="x\\\\y\\"z\\nw\\tq",b="}{,="} 1.5e3',
    'DCGM_FI_DEV_FB_USED{a=""} NaN',
    'DCGM_FI_DEV_FB_USED{a="1"} +Inf',
    'DCGM_FI_DEV_FB_USED{a="1"} -0.0 -5',
    'DCGM_FI_DEV_FB_USED{a="1"} 99999999999999999999999999',
    f"DCGM_FI_DEV_FB_USED{{{H200}}} 0x10",
    f"DCGM_FI_DEV_FB_USED{{{H200}}} 1_000",
    f"DCGM_FI_DEV_FB_USED{{{H200}}} ٣",
]


def shown(parsed: Parsed | None) -> str | None:
    """Comparable, NaN included, with each value's type (an int must stay an int)."""
    if parsed is None:
        return None
    name, labels, value, stamp = parsed
    return repr((name, labels, value, type(value), stamp))


@pytest.mark.parametrize("text", FIXTURE_LINES + EDGE_LINES)
def test_the_linear_reader_says_what_prometheus_client_says(text: str) -> None:
    try:
        expected = shown(prometheus(text))
    except ValueError:
        expected = "ValueError"
    try:
        got = shown(parse_common(text))
    except ValueError:
        got = "ValueError"
    assert got is None or got == expected, text


def _uncommon(text: str) -> bool:
    try:
        return parse_common(text) is None
    except ValueError:  # read, and its value refused: the linear reader's answer
        return False


def test_every_fixture_line_takes_the_linear_reader() -> None:
    # the uncommon forms left to prometheus-client are rare; real exporter lines are not one
    assert [t for t in _lines(malformed=False) if _uncommon(t)] == []


def test_a_line_of_many_labels_is_read_whole() -> None:
    labels = ",".join(f'l{i}="v{i}"' for i in range(100_000))
    ((item,),) = [list(read_lines(f"DCGM_FI_DEV_FB_USED{{{labels}}} 7\n"))[:1]]
    assert not hasattr(item, "kind"), item
    assert len(item.labels) == 100_000 and item.labels["l99999"] == "v99999"  # type: ignore[union-attr]


def test_a_long_line_in_an_uncommon_form_is_refused_without_the_slow_parser() -> None:
    odd = "DCGM_FI_DEV_FB_USED{" + ",".join(f"l{i}=v" for i in range(SLOW_PARSE_MAX_CHARS)) + "} 1"
    (item,) = list(read_lines(odd))
    assert getattr(item, "kind", None) == "syntax"
    assert f"a {len(odd)}-character line not of the form name{{labels}} value" in item.reason  # type: ignore[union-attr]


def test_a_page_mostly_unreadable_is_given_up_after_the_bound() -> None:
    good = f"DCGM_FI_DEV_FB_USED{{{H200}}} 1024\n"
    page = good + "not a metric line\n" * (3 * REFUSED_LINES_MAX) + good
    result = parse(page)
    assert result.samples == []  # none from before the bound either: the page is refused whole
    assert len(result.rejected) == REFUSED_LINES_MAX + 1
    last = result.rejected[-1]
    assert last.line_no == REFUSED_LINES_MAX + 2  # the line after the last one read
    assert last.reason == (
        f"{REFUSED_LINES_MAX} lines refused by line {REFUSED_LINES_MAX + 1}: the rest of the page "
        "is not read and none of it is used (is this a dcgm-exporter page?)"
    )


def test_a_page_under_the_bound_is_still_read_line_by_line() -> None:
    good = f"DCGM_FI_DEV_FB_USED{{{H200}}} 1024\n"
    result = parse(good + "not a metric line\n" * (REFUSED_LINES_MAX - 1))
    assert len(result.samples) == 1 and len(result.rejected) == REFUSED_LINES_MAX - 1
