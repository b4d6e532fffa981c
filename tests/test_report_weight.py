"""A report's weight: it embeds plotly's cartesian bundle once (a third of the full plotly.js), fetched
with npm and checked against the pinned integrity; a tarball other than the pinned one is refused and
the report falls back to the full bundle, still self-contained. That every chart still draws with the
cartesian bundle is test_report_browser's (each report's charts drawn in Chromium)."""

import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs_version

from dimster.report import plotly_js
from dimster.report.page import Page

pytestmark = pytest.mark.unit

CARTESIAN_HEADER = "plotly.js (cartesian - minified) v"
FULL_HEADER = "* plotly.js v"


def test_a_page_of_charts_embeds_the_cartesian_bundle_once_and_weighs_a_third_of_the_full_one():
    plotly_js.fetch_cartesian(get_plotlyjs_version())  # scripts/setup.sh has fetched it: the cache's
    page = Page("weight")
    page.add(page.figure(go.Figure(go.Scatter(y=[1, 2, 3]))), page.figure(go.Figure(go.Bar(y=[3, 1]))))
    html = page.render()
    assert html.count(CARTESIAN_HEADER) == 1 and FULL_HEADER not in html
    assert html.count("Plotly.newPlot(") == 2
    full = len(plotly_js.get_plotlyjs())
    assert len(html) < full / 2, (len(html), full)  # 1.5 MB against 4.8 MB


def test_a_tarball_other_than_the_pinned_one_is_refused_and_the_report_embeds_the_full_bundle(tmp_path, monkeypatch):
    monkeypatch.setenv("DIMSTER_CACHE_DIR", str(tmp_path))
    version = get_plotlyjs_version()
    monkeypatch.setitem(plotly_js.INTEGRITY, version, "sha512-" + "A" * 86 + "==")
    with pytest.raises(ValueError, match="not the tarball pinned"):
        plotly_js.fetch_cartesian(version)  # the real npm package, another integrity than it has
    assert not plotly_js.cartesian_path(version).exists()

    monkeypatch.delitem(plotly_js.INTEGRITY, version)
    with pytest.raises(ValueError, match="no integrity pinned"):
        plotly_js.fetch_cartesian(version)
    plotly_js.plotly_js.cache_clear()
    try:
        page = Page("fallback")
        page.add(page.figure(go.Figure(go.Scatter(y=[1, 2]))))
        html = page.render()
        assert FULL_HEADER in html and CARTESIAN_HEADER not in html
    finally:
        plotly_js.plotly_js.cache_clear()
