"""The charts of docs/campaigns.md from a summarized campaign folder: each figure named below against the
campaign's first dimension (one series per value of the others), as campaign.html draws it, rendered
by headless Chromium into one PNG; and the point table as Markdown on stdout.

Usage: .venv/bin/python scripts/campaign_charts.py CAMPAIGN_DIR OUT.png [METRIC ...]
(METRIC: consumed_msgs_per_s, e2e_p99_ms, mode_limit_msgs_per_s, compression_ratio, ...; default the
first two)."""

import sys
from pathlib import Path

import pandas as pd

from dimster.campaign.model import read_campaign_json, short_key
from dimster.errors import DimsterError
from dimster.report.campaign_page import COST_METRICS, KEY_METRICS, MODE_METRICS, campaign_dimensions, dimension_figure
from dimster.report.page import Page

WIDTH, HEIGHT = 900, 380  # per chart


def main(folder: Path, out: Path, metrics: list[str]) -> None:
    labels = {**KEY_METRICS, **MODE_METRICS, **COST_METRICS}
    if unknown := [m for m in metrics if m not in labels]:
        raise DimsterError(f"no chart for {', '.join(unknown)}; the metrics are: {', '.join(labels)}")
    campaign = read_campaign_json(folder)
    points = pd.read_parquet(folder / "campaign" / "summary" / "points.parquet")
    dimensions = campaign_dimensions(campaign)
    values = {int(p["index"]): p["values"] for p in campaign["points"]}
    page = Page(campaign["name"])
    for metric in metrics:
        figure = dimension_figure(dimensions[0], dimensions[1:], points, values, metric, labels[metric])
        figure.update_layout(width=WIDTH, height=HEIGHT)
        if metric.endswith("_ms"):  # from milliseconds to a minute when consumers fall behind
            figure.update_yaxes(type="log")
        page.add(page.figure(figure))
    page.screenshot(out, WIDTH + 80, (HEIGHT + 40) * len(metrics) + 60)
    print(markdown_table(points, dimensions, metrics, labels))


def markdown_table(points: pd.DataFrame, dimensions, metrics: list[str], labels: dict[str, str]) -> str:
    keys = [key for d in dimensions for key in d.keys]
    header = [short_key(k) for k in keys] + [labels[m] for m in metrics]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in points.to_dict("records"):
        cells = [str(row[k]) for k in keys] + [_number(row.get(f"{m}_mean")) for m in metrics]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _number(value) -> str:
    if value is None or pd.isna(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    try:
        main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:] or ["consumed_msgs_per_s", "e2e_p99_ms"])
    except DimsterError as e:
        sys.exit(f"campaign_charts.py: {e}")
