"""The HTML report in a real headless Chromium: images decode and the page paints.

String checks cannot tell whether a browser accepts the inlined ``data:`` PNGs or whether the
page renders as something other than a blank sheet; a browser can. Chromium comes from Debian's
``chromium`` package, which ``.ci/run`` installs. Without it these tests fail rather than skip,
so a CI image that lost the browser is noticed instead of silently passing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from streams.app.report import write_report
from tests.app.headless_chromium import chromium
from tests.app.report_fixtures import make_empty_report_data, make_report_data

pytestmark = pytest.mark.browser

WINDOW = (1280, 2400)


@pytest.fixture(params=["demand", "time", "empty"])
def report_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    data = {
        "demand": lambda: make_report_data(x_is_time=False, run_id="<script>alert(1)</script>"),
        "time": lambda: make_report_data(x_is_time=True),
        "empty": make_empty_report_data,
    }[request.param]()
    return write_report(data, tmp_path / "report.html")


def test_all_three_images_load(report_path: Path, tmp_path: Path) -> None:
    result = chromium(tmp_path, "--dump-dom", report_path.as_uri())
    body = re.search(r"<body[^>]*>", result.stdout)
    if body is None or 'data-images-loaded="3/3"' not in body.group(0):
        print(result.stderr)
    assert body is not None, f"no <body> in the dumped DOM:\n{result.stdout[:2000]}"
    assert 'data-images-loaded="3/3"' in body.group(0), (
        f"body tag after load: {body.group(0)}\n--- chromium stderr ---\n{result.stderr}"
    )
    assert "alert(1)</script>" not in result.stdout  # the hostile run id stayed text


def test_screenshot_is_not_blank(report_path: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    result = chromium(
        tmp_path,
        f"--screenshot={shot}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        report_path.as_uri(),
    )
    assert shot.is_file(), f"no screenshot written\n{result.stderr}"
    image = np.asarray(imread(shot))
    assert image.ndim == 3 and image.shape[1] == WINDOW[0], image.shape
    rgb = image[..., :3]
    assert float(np.ptp(rgb)) > 0.5, "screenshot is one flat colour"
    # Text, charts and backgrounds: far more than a couple of colours.
    colours = np.unique(np.round(rgb.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, len(colours)
