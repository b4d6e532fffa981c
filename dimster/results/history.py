"""`dimster history`: the runs and campaigns of a results folder, one row each, newest last, read from
their JSON files only (run.json, summary/summary.json, campaign.json, campaign/summary/summary.json),
so that a trend shows without opening each report."""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from dimster.results.bundle import is_run_folder
from dimster.verdict.figures import FIGURES, NUMBER, summary_value

KEY_FIGURES = ("produced.rate", "consumed.rate", "e2e.p99", "publish.p99", "lost")
# what a point of campaign.json has once it ran to its end (a resumed campaign runs the others again)
POINT_DONE = ("completed", "forced", "failed")
NOT_SUMMARIZED = "not summarized"


@dataclass
class History:
    rows: list[dict]  # oldest first
    matched: int = 0  # rows of the workload asked for, before the limit
    skipped: list[str] = field(default_factory=list)  # "<folder>: why", a folder that could not be read
    workloads: list[str] = field(default_factory=list)  # every workload (or campaign) name seen, unfiltered


class Unreadable(Exception):
    """A run's or a campaign's JSON file that is missing, not JSON, or not an object."""


def read_history(root: Path, workload: str | None = None, limit: int = 20) -> History:
    """The rows of `root`'s runs (its children with run.json) and campaigns (its children or those of
    `campaigns/` with campaign.json), sorted by start time; `workload` keeps one workload's (or
    campaign's) rows; `limit` keeps the newest (0: all). A folder whose JSON cannot be read is skipped
    and named in `skipped`."""
    rows, skipped = [], []
    runs = [p for p in sorted(root.iterdir()) if p.is_dir() and is_run_folder(p)]
    # `dimster campaign` writes to results/campaigns/: RESULTS_DIR may be either folder
    found = [*root.glob("*/campaign.json"), *root.glob("campaigns/*/campaign.json")]
    campaigns = sorted(p.parent for p in found)
    for path, read in [*((p, run_row) for p in runs), *((p, campaign_row) for p in campaigns)]:
        try:
            rows.append(read(path))
        except Unreadable as e:
            skipped.append(f"{path.relative_to(root)}: {e}")
    rows.sort(key=lambda row: row["_time"])
    names = sorted({str(row["workload"]) for row in rows if row["workload"] is not None})
    if workload is not None:
        rows = [row for row in rows if row["workload"] == workload]
    matched = len(rows)
    rows = rows[-limit:] if limit else rows
    for row in rows:
        del row["_time"]
    return History(rows, matched, skipped, names)


def run_row(run_dir: Path) -> dict:
    info = read_json(run_dir / "run.json")
    summary_path = run_dir / "summary" / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else None
    started = _time(info.get("started"))
    versions = info.get("versions")
    verdict = summary.get("verdict") if summary else None
    return {
        "kind": "run",
        "id": info.get("run_id") or run_dir.name,
        "workload": info.get("workload"),
        "started": started and started.isoformat(),
        "environment": info.get("environment"),
        "kafka": versions.get("kafka") if isinstance(versions, dict) else None,
        "status": info.get("status"),
        "failure": info.get("failure"),  # why a failed run failed
        "points": None,
        **{name: _figure(name, summary, info) for name in KEY_FIGURES},
        "verdict": run_verdict(info, summary),
        "aborted_by": verdict.get("aborted_by") if isinstance(verdict, dict) else None,
        "_time": _sort_key(started),
    }


def run_verdict(info: dict, summary: dict | None) -> str:
    """passed | failed | none (no thresholds, no correctness verdict) | not summarized: the thresholds'
    verdict in summary.json and a correctness run's own (run.json `mode.passed`) together."""
    mode = info.get("mode")
    correctness = mode.get("passed") if isinstance(mode, dict) else None
    if summary is None:
        return "failed" if correctness is False else NOT_SUMMARIZED
    return _verdict(_passed(summary), correctness)


def _verdict(*passed: object) -> str:
    found = [v for v in passed if isinstance(v, bool)]
    return "none" if not found else "passed" if all(found) else "failed"


def _passed(summary: dict) -> object:
    """summary.json's `verdict.passed`: None when the workload has no thresholds."""
    verdict = summary.get("verdict")
    return verdict.get("passed") if isinstance(verdict, dict) else None


def campaign_row(folder: Path) -> dict:
    state = read_json(folder / "campaign.json")
    points = state.get("points")
    if not isinstance(points, list):
        raise Unreadable("campaign.json has no list of points")
    summary_path = folder / "campaign" / "summary" / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else None
    created = state.get("created")
    started = datetime.fromtimestamp(created, UTC) if isinstance(created, int | float) else None
    done = sum(1 for p in points if isinstance(p, dict) and p.get("status") in POINT_DONE)
    return {
        "kind": "campaign",
        "id": folder.name,
        "workload": state.get("name"),
        "started": started and started.isoformat(),
        "environment": state.get("environment"),
        "kafka": None,
        "status": f"{done}/{len(points)} points",
        "failure": None,
        "points": {"done": done, "total": len(points)},
        **dict.fromkeys(KEY_FIGURES),
        "verdict": NOT_SUMMARIZED if summary is None else _verdict(_passed(summary)),
        "aborted_by": None,
        "_time": _sort_key(started),
    }


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise Unreadable(f"no {path.name}") from None
    except (OSError, ValueError) as e:
        raise Unreadable(f"{path.name} is unreadable ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise Unreadable(f"{path.name} is not a JSON object")
    return data


def _figure(name: str, summary: dict | None, info: dict) -> float | int | None:
    """From summary.json; a total (lost) from run.json when the run has no summary. Counts as integers."""
    figure = FIGURES[name]
    value = summary_value(figure, summary) if summary else None
    value = summary_value(figure, info) if value is None else value
    return int(value) if value is not None and figure.dim == NUMBER and value.is_integer() else value


def _time(text: object) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _sort_key(moment: datetime | None) -> datetime:
    """A row without a readable time sorts first (oldest)."""
    return moment or datetime.min.replace(tzinfo=UTC)
