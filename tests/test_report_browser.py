"""The HTML reports in a real browser (Debian's headless Chromium through Playwright): synthetic run
folders written directly (no Kafka, no Spark), `report.html` and a comparison rendered offline with no
console errors, no page errors and no network request, charts drawn with the modification labels; and
at two window widths, report.html, a comparison and campaign.html each with every value inside its panel."""

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from dimster.errors import DimsterError
from dimster.report.campaign_page import write_campaign_page
from dimster.report.compare import write_comparison
from dimster.report.html import write_report
from tests.conftest import dimster
from tests.report_runs import Scenario, write_campaign, write_run

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# ---- the browser -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; scripts/test.sh does)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Opened:
    page: Page
    problems: list[str]  # console errors and uncaught page errors
    requests: list[str]


def open_offline(browser: Browser, path: Path, width: int = 1400) -> Opened:
    """Open `path` with every request recorded and every non-file request refused; wait for the charts."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    opened = Opened(page, [], [])
    page.on("console", lambda m: opened.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: opened.problems.append(f"page error: {e}"))
    page.on("request", lambda r: opened.requests.append(r.url))
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot svg.main-svg').length > 0", timeout=15_000)
    page.wait_for_timeout(300)  # plotly draws annotations right after the axes
    return opened


def rendered_charts(page: Page) -> int:
    return page.locator(".js-plotly-plot:has(svg.main-svg)").count()


def trace_counts(page: Page) -> list[int]:
    return page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => d.data.length)")


# The boxes a page draws (panels, cards, the header's fields, notes, charts, tables' frames): nothing in
# one may stick out of it or be cut off by it, except inside an element that scrolls (a wide table's frame).
BOXES = ".panel, .card, .meta, .notes, .chart, .box, .scroll, pre"
OVERFLOWS = """(boxes) => {
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    [...el.classList].map(c => '.' + c).join('') +
    ' "' + (el.innerText || el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60) + '"';
  const found = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) {
    found.push(`the page: scroll width ${root.scrollWidth} > width ${root.clientWidth}`);
  }
  const main = document.querySelector('main');
  const content = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight);
  const reported = new Set();  // an element sticking out: what it holds sticks out with it, unsaid
  for (const box of document.querySelectorAll(boxes)) {
    const edge = box.getBoundingClientRect().right;
    if (!box.parentElement.closest(boxes) && edge > content + 1) {
      found.push(`${name(box)}: right edge ${Math.round(edge)} beyond the page's ${Math.round(content)}`);
    }
    for (const el of [box, ...box.querySelectorAll('*')]) {
      if (el.parentElement.closest('.js-plotly-plot')) continue;  // plotly lays out its own drawing
      if (reported.has(el.parentElement)) {
        reported.add(el);
        continue;
      }
      if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 && !scrolls(el)) {
        found.push(`${name(el)}: scroll width ${el.scrollWidth} > width ${el.clientWidth}`);
      }
      let scrolled = false;
      for (let up = el.parentElement; el !== box && !scrolled; up = up.parentElement) {
        scrolled = scrolls(up);
        if (up === box) break;
      }
      const right = el.getBoundingClientRect().right;
      if (el !== box && !scrolled && right > edge + 1) {
        found.push(`${name(el)}: right edge ${Math.round(right)} beyond its box's ${Math.round(edge)}`);
        reported.add(el);
      }
    }
  }
  return [...new Set(found)];
}"""


def overflows(page: Page) -> list[str]:
    """Each element that sticks out of its box or is cut off, with its figures (none on a good page)."""
    return page.evaluate(OVERFLOWS, BOXES)


# ---- the tests -------------------------------------------------------------------------------------------
@pytest.mark.browser
def test_report_renders_offline_with_modifications(tmp_path: Path, browser: Browser) -> None:
    run_dir = write_run(tmp_path, Scenario())
    report = write_report(run_dir)
    assert report == run_dir / "report.html"
    assert report.read_text().count("Plotly.newPlot") >= 4

    opened = open_offline(browser, report)
    page = opened.page
    assert opened.problems == []
    assert opened.requests == [report.resolve().as_uri()]
    assert rendered_charts(page) >= 4  # throughput, backlog, latency, delivery counts
    plots = "[...document.querySelectorAll('.js-plotly-plot')]"
    backgrounds = page.evaluate(plots + ".map(p => p._fullLayout.plot_bgcolor)")
    assert set(backgrounds) == {"white"}, backgrounds  # every chart in dimster's look (plotly_white)
    for label in ("producerRate=4000", "consumersPerGroup=12", "broker 2 left", "broker 2 back"):
        assert page.locator("g.annotation text", has_text=label).count() >= 1, label
    body = page.inner_text("body")
    for expected in (
        "synthetic-share",
        "completed",
        "4.3.1",
        "2.16.0",
        "8 CPUs",
        "Partitions",
        "Consumers",
        "Producers",
        "Timeline",
        "workload.yaml",
        "environment.yaml",
        "max.poll.records",
    ):
        assert expected in body, expected
    assert "Notes" not in body  # nothing missing
    clients = page.inner_text("#clients")  # each client's library
    assert clients.count("java") == 3 and clients.count("librdkafka") == 12  # 3 producers, 12 consumers
    # The page renders to an image (docs/report-screenshot.png is made from a real run by
    # scripts/report_screenshot.sh; tests never write tracked files).
    screenshot = tmp_path / "report.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    page.close()


@pytest.mark.browser
def test_report_of_a_partial_run_shows_what_exists(tmp_path: Path, browser: Browser) -> None:
    run_dir = write_run(tmp_path, Scenario(name="partial"))
    for name in ("latency_per_second", "latency_per_client", "client_stats", "delivery_counts"):
        (run_dir / "summary" / f"{name}.csv").unlink()
    summary = json.loads((run_dir / "summary" / "summary.json").read_text())
    for key in ("latency_ms", "client_stats", "delivery_counts"):
        del summary[key]
    summary["notes"] = ["metrics/histograms is missing"]
    (run_dir / "summary" / "summary.json").write_text(json.dumps(summary))
    (run_dir / "environment.yaml").unlink()

    opened = open_offline(browser, write_report(run_dir))
    assert opened.problems == []
    assert rendered_charts(opened.page) == 2  # throughput and backlog
    notes = opened.page.inner_text(".notes")
    for expected in (
        "metrics/histograms is missing",
        "summary/latency_per_second.csv",
        "summary/client_stats.csv",
        "summary/delivery_counts.csv",
        "environment.yaml",
    ):
        assert expected in notes, expected
    opened.page.close()


@pytest.mark.browser
def test_compare_overlays_two_runs(tmp_path: Path, browser: Browser) -> None:
    first = write_run(tmp_path, Scenario(name="rate-2000"))
    second = write_run(tmp_path, Scenario(name="rate-3000", rate=3000.0, modifications=[], events=[]))
    output = write_comparison([first, second], tmp_path / "out" / "comparison.html")

    opened = open_offline(browser, output)
    page = opened.page
    assert opened.problems == []
    assert opened.requests == [output.resolve().as_uri()]
    assert rendered_charts(page) == 3
    assert trace_counts(page) == [2, 2, 2]
    assert page.locator("g.legend g.traces").count() == 6
    table = page.inner_text("#key-numbers")
    assert "#1 rate-2000" in table and "#2 rate-3000" in table
    differences = page.inner_text("#differences")
    assert "producerRate" in differences and "3000" in differences
    page.close()


@pytest.mark.unit
def test_reports_refuse_folders_without_a_summary(tmp_path: Path) -> None:
    not_a_run = tmp_path / "photos"
    not_a_run.mkdir()
    with pytest.raises(DimsterError, match="is not a dimster run folder"):
        write_report(not_a_run)
    run_dir = write_run(tmp_path, Scenario())
    shutil.rmtree(run_dir / "summary")
    with pytest.raises(DimsterError, match=r"no summary yet; run `dimster summarize .*` first"):
        write_report(run_dir)
    with pytest.raises(DimsterError, match="no summary yet"):
        write_comparison([run_dir, run_dir], tmp_path / "c.html")


@pytest.mark.unit
def test_cli_report_and_compare(tmp_path: Path) -> None:
    runs = tmp_path / "results"
    runs.mkdir()
    first, second = write_run(runs, Scenario(name="one")), write_run(runs, Scenario(name="two", rate=2500.0))
    result = dimster("report", str(first))
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == str(first / "report.html")
    output = tmp_path / "cmp.html"
    result = dimster("compare", str(first), str(second), "-o", str(output))
    assert result.code == 0, result.stderr
    assert output.is_file() and result.stdout.strip() == str(output)
    result = dimster("report", str(tmp_path))
    assert result.code == 2
    assert result.error_lines == [f"dimster: error: {tmp_path} is not a dimster run folder (no run.json, no metrics/)"]


LOCK_BUDGET = {  # a `limit` event as coordinator/loop/limit_watch.py writes it
    "limit": "lock budget", "limitRate": 1200.0, "measured": 1190.0, "offered": 2000.0,
    "sentence": "lock budget 100 / 50-record batches -> 2 of 4 consumers busy per partition x 200 msg/s x 3 "
    "partitions -> 1,200 msg/s",
    "levers": ["kafkaConfig.producerConfig.batch.size", "groupConfig.share.partition.max.record.locks",
               "kafkaConfig.shareConsumerConfig.share.acquire.mode"],
    "allowed": {"lock budget": 1200.0, "processing capacity": 2400.0}, "notes": [],
}  # fmt: skip


@pytest.mark.browser
@pytest.mark.parametrize("width", [1400, 1920])
def test_every_panel_holds_its_values(tmp_path: Path, browser: Browser, width: int) -> None:
    """Two runs' reports, their comparison and a campaign page with a real run's long values (three roles'
    client libraries, the group's account table, a dead-letter topic, long dimension keys): wide text
    wraps, wide tables scroll."""
    runs = tmp_path / "results"
    runs.mkdir()
    first = write_run(runs, Scenario())
    limits = [(45.0, "limit", LOCK_BUDGET), (75.0, "limit_cleared", {})]  # and the diagnoses' long lines
    second = write_run(
        runs, Scenario(name="quickstart-dead-letters", rate=3000.0, modifications=[], events=limits, dead_letters=True)
    )
    pages = {
        "report": write_report(first),
        "report with a dead-letter queue": write_report(second),
        "comparison": write_comparison([first, second], tmp_path / "comparison.html"),
        "campaign": write_campaign_page(write_campaign(tmp_path)),
    }
    found = []
    for name, path in pages.items():
        opened = open_offline(browser, path, width)
        assert opened.problems == [], name
        found += [f"{name}: {problem}" for problem in overflows(opened.page)]
        if name == "report with a dead-letter queue":
            assert "What limited the share groups" in opened.page.content()
        if name == "report":  # the values the issue found cut off are there, inside the Clients panel
            clients = opened.page.locator(".panel", has_text="client libraries")
            assert "producer java, consumer librdkafka, shareConsumer librdkafka" in clients.inner_text()
        opened.page.close()
    assert not found, "\n".join(found)
