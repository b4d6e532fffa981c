"""Whether a candidate regressed from a baseline (two runs, or two campaigns point by point): per
figure, better, worse, the same or undecided, with a one-sided Mann-Whitney U test.

The repeats of a point decide when there are enough of them (4 a side, or 3 and 4, at alpha 0.05);
else, for latencies and rates of runs, the per-second values of the measured phase do; else the
figure is undecided and says how many repeats would tell. Counts (lost, duplicates, ...) are outcomes,
not noisy samples: they get no test. A figure is worse when it moved beyond its tolerance in its
worse direction and the test says the move is real (p < alpha); that is a regression."""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dimster.errors import DimsterError
from dimster.verdict.expressions import parse_quantity
from dimster.verdict.figures import BYTE_RATE, FIGURES, MSG_RATE, NUMBER, TIME, Figure, summary_value
from dimster.verdict.judge import saturated_reason
from dimster.verdict.stats import mann_whitney, repeats_needed, smallest_p
from dimster.yamlfile import closest

ALPHA = 0.05
DEFAULT_FIGURES = (
    "produced.rate", "consumed.rate", "e2e.p50", "e2e.p99", "e2e.p99.9", "publish.p99", "lost", "duplicates",
)  # fmt: skip
WHEN_PRESENT = ("dead_lettered",)  # compared by default when either side has it
DEFAULT_TOLERANCES = {TIME: "10%", MSG_RATE: "5%", BYTE_RATE: "5%", NUMBER: "0"}
# a rate's per-second column in throughput_per_second, and its scale to the figure's unit
INTERVAL_RATES = {
    "produced.rate": ("sent", 1.0),
    "consumed.rate": ("received", 1.0),
    "produced.byteRate": ("sent_bytes", 1e-6),
    "consumed.byteRate": ("received_bytes", 1e-6),
}


@dataclass
class Point:
    """A run, or a campaign's point: each figure's value per repeat, and per measured second."""

    label: str
    values: str  # the point's dimension values as JSON: how points of two campaigns match
    repeats: dict[str, list[float]]
    intervals: dict[str, list[float]] = field(default_factory=dict)
    saturated: str | None = None  # why its latencies and rates cannot tell: a saturated load generator


@dataclass(frozen=True)
class Tolerance:
    text: str
    value: float
    relative: bool  # a share of the baseline's central value, else an amount in the figure's unit

    def allowed(self, baseline: float) -> float:
        return self.value * abs(baseline) if self.relative else self.value


# ---- tolerances ------------------------------------------------------------------------------------------
def parse_tolerances(items: Sequence[str]) -> dict[str, str]:
    """`--tolerance FIGURE=VALUE` items as {figure: value}; a bad item is one error line."""
    found = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise DimsterError(f"--tolerance {item}: expected FIGURE=VALUE, as e2e.p99=10% or e2e.p99=5ms")
        if name not in FIGURES:
            raise DimsterError(f"--tolerance {item}: unknown figure '{name}'{closest(name, FIGURES)}")
        found[name] = value
    return found


def tolerance(figure: Figure, text: str) -> Tolerance:
    """`10%` (of the baseline's value) or an amount in the figure's unit (`5ms`, `50msg/s`, `0`)."""
    example = "0 or 10%" if figure.dim == NUMBER else f"10% or 5{figure.unit}"
    what = f"--tolerance {figure.name}={text}"
    try:
        value, dim = parse_quantity(text)
    except ValueError as e:
        raise DimsterError(f"{what}: {e}") from None
    if dim not in (figure.dim, "percent"):
        is_in, amount = (f"in {figure.unit}", f"an amount in {figure.unit}") if figure.unit else ("a count", "a number")
        raise DimsterError(f"{what}: {figure.name} is {is_in}; give a percentage or {amount}, as {example}")
    return Tolerance(text, value, dim == "percent")


# ---- the two sides -----------------------------------------------------------------------------------------
def load_side(folder: Path) -> tuple[str, list[Point]]:
    """("run", [its one point]) or ("campaign", its points); a folder that is neither, or has no
    summary yet, is one error line."""
    if not folder.is_dir():
        raise DimsterError(f"{folder}: no such folder")
    if (folder / "campaign.json").is_file():
        return "campaign", _campaign_points(folder)
    if (folder / "run.json").is_file() or (folder / "metrics").is_dir():  # a run, also one cut short
        return "run", [_run_point(folder)]
    raise DimsterError(f"{folder} is neither a dimster run folder (run.json) nor a campaign folder (campaign.json)")


def _run_point(run_dir: Path) -> Point:
    summary = _read_json(run_dir / "summary" / "summary.json", run_dir)
    values = {name: summary_value(figure, summary) for name, figure in FIGURES.items()}
    repeats = {name: [value] for name, value in values.items() if value is not None and math.isfinite(value)}
    return Point("run", "{}", repeats, _intervals(run_dir / "summary"), saturated_reason(summary))


def _intervals(summary_dir: Path) -> dict[str, list[float]]:
    """Latencies and rates per second of the measured phase (the seconds throughput_per_second marks
    `measure`), from the summary's per-second tables."""
    throughput = _table(summary_dir, "throughput_per_second")
    if throughput is None or "phase" not in throughput:
        return {}
    measured = throughput[throughput["phase"] == "measure"]
    found = {
        name: [float(v) * scale for v in measured[column].dropna()]
        for name, (column, scale) in INTERVAL_RATES.items()
        if column in measured
    }
    latency = _table(summary_dir, "latency_per_second")
    if latency is not None and {"second", "metric"} <= set(latency.columns):
        latency = latency[latency["second"].isin(measured["second"])]
        for name, figure in FIGURES.items():
            _, metric, column = figure.source.split(".") if figure.source.startswith("latency_ms.") else ("", "", "")
            if column in latency:
                found[name] = [float(v) for v in latency.loc[latency["metric"] == metric, column].dropna()]
    return {name: values for name, values in found.items() if values}


def _campaign_points(campaign_dir: Path) -> list[Point]:
    """A point per entry of the campaign summary, its repeats from the summary's runs table."""
    summary_dir = campaign_dir / "campaign" / "summary"
    runs = _table(summary_dir, "runs")
    if runs is None or not (summary_dir / "summary.json").is_file():
        raise DimsterError(f"{campaign_dir}: no campaign summary yet; run `dimster summarize {campaign_dir}` first")
    summary = _read_json(summary_dir / "summary.json", campaign_dir)
    points = []
    for entry in summary.get("points") or []:
        mine = runs[runs["point"] == entry.get("point")] if "point" in runs else runs.iloc[0:0]
        repeats = {
            name: [float(v) for v in mine[f.campaign_column].dropna()]
            for name, f in FIGURES.items()
            if f.campaign_column in mine
        }
        label = f"point {entry.get('point')} ({entry.get('label') or 'no dimensions'})"
        values = json.dumps(entry.get("values") or {}, sort_keys=True, default=str)
        points.append(Point(label, values, {name: v for name, v in repeats.items() if v}))
    return points


def _read_json(path: Path, folder: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DimsterError(f"{folder}: no summary yet; run `dimster summarize {folder}` first")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DimsterError(f"{path}: not readable JSON; run `dimster summarize {folder}` again") from None
    return data if isinstance(data, dict) else {}


def _table(summary_dir: Path, name: str) -> pd.DataFrame | None:
    """A summary table, from its Parquet or CSV file; None when it is missing or unreadable."""
    for suffix, read in ((".parquet", pd.read_parquet), (".csv", pd.read_csv)):
        path = summary_dir / f"{name}{suffix}"
        try:
            if path.is_file():
                return read(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
    return None


# ---- the verdict -----------------------------------------------------------------------------------------
def compare_verdict(
    baseline: Path, candidate: Path, tolerances: dict[str, str], alpha: float = ALPHA, judge_saturated: bool = False
) -> dict:
    """The comparison of `candidate` against `baseline` (two runs, or two campaigns) as the JSON of
    `dimster compare --verdict --json`; bad input is one error line (DimsterError). Latencies and rates
    of a run whose measured phase had a saturated load generator are undecided, unless `judge_saturated`."""
    unknown = [name for name in tolerances if name not in FIGURES]
    if unknown:
        raise DimsterError(f"--tolerance: unknown figure '{unknown[0]}'{closest(unknown[0], FIGURES)}")
    chosen = {name: tolerance(FIGURES[name], text) for name, text in tolerances.items()}
    (base_kind, base_points), (cand_kind, cand_points) = load_side(baseline), load_side(candidate)
    if base_kind != cand_kind:
        raise DimsterError(
            f"compare --verdict compares two runs or two campaigns: {baseline} is a {base_kind}, "
            f"{candidate} a {cand_kind}"
        )
    notes: list[str] = []
    by_values = {point.values: point for point in cand_points}
    pairs = []
    for point in base_points:
        if point.values in by_values:
            pairs.append((point, by_values.pop(point.values)))
        else:
            notes.append(f"the baseline's {point.label} has no point with its values in the candidate")
    notes += [f"the candidate's {p.label} has no point with its values in the baseline" for p in by_values.values()]
    if not pairs:
        raise DimsterError(f"{candidate} has no point with the dimension values of a point of {baseline}")
    left_out: set[str] = set()
    points: list[dict[str, Any]] = []
    for base, cand in pairs:
        names = [*DEFAULT_FIGURES, *WHEN_PRESENT]
        names += [name for name in chosen if name not in names]
        present = [name for name in names if name in chosen or name in base.repeats or name in cand.repeats]
        left_out |= {name for name in DEFAULT_FIGURES if name not in present}
        figures = [
            compare_figure(FIGURES[name], chosen.get(name) or _default(FIGURES[name]), base, cand, alpha)
            if judge_saturated or FIGURES[name].dim == NUMBER or not (base.saturated or cand.saturated)
            else _saturated_row(FIGURES[name], base, cand)
            for name in present
        ]
        points.append({"label": base.label, "figures": figures})
    if left_out:
        notes.append(f"neither side has {', '.join(sorted(left_out))}: not compared")
    regression = any(f["verdict"] == "worse" for point in points for f in point["figures"])
    return {
        "baseline": str(baseline),
        "candidate": str(candidate),
        "alpha": alpha,
        "regression": regression,
        "points": points,
        "notes": notes,
    }


def _saturated_row(figure: Figure, base: Point, cand: Point) -> dict:
    """A latency or rate of a side whose load generator was saturated: undecided, and why."""
    b, c = _mean(base.repeats.get(figure.name, [])), _mean(cand.repeats.get(figure.name, []))
    side, reason = ("the baseline", base.saturated) if base.saturated else ("the candidate", cand.saturated)
    return {
        "figure": figure.name, "unit": figure.unit, "baseline": b, "candidate": c, "change": _change(b, c),
        "tolerance": DEFAULT_TOLERANCES[figure.dim], "test": "none", "p_worse": None, "p_better": None,
        "samples": [0, 0],
        "verdict": "undecided", "reason": f"{side}: {reason}",
    }  # fmt: skip


def _default(figure: Figure) -> Tolerance:
    return tolerance(figure, DEFAULT_TOLERANCES[figure.dim])


def compare_figure(figure: Figure, tol: Tolerance, base: Point, cand: Point, alpha: float) -> dict:
    """One figure's row of the verdict (shapes: `figures` of a point)."""
    base_repeats, cand_repeats = base.repeats.get(figure.name, []), cand.repeats.get(figure.name, [])
    b, c = _mean(base_repeats), _mean(cand_repeats)
    row: dict[str, Any] = {
        "figure": figure.name, "unit": figure.unit, "baseline": b, "candidate": c, "change": _change(b, c),
        "tolerance": tol.text, "test": "none", "p_worse": None, "p_better": None,
        "samples": [len(base_repeats), len(cand_repeats)], "verdict": "undecided", "reason": "",
    }  # fmt: skip
    if b is None or c is None:
        missing = " and ".join(side for side, v in (("the baseline", b), ("the candidate", c)) if v is None)
        return {**row, "reason": f"no value in {missing}"}
    worse_by = (c - b) if figure.worse == "higher" else (b - c)  # > 0: moved the worse way
    allowed = tol.allowed(b)
    beyond = f"{change_text(row)} beyond the {tol.text} tolerance"
    if figure.dim == NUMBER:
        verdict = "worse" if worse_by > allowed else "better" if -worse_by > allowed else "same"
        where = "within" if verdict == "same" else "beyond"
        reason = f"a count, no test: {c:g} against the baseline's {b:g}, {where} the tolerance of {tol.text}"
        return {**row, "verdict": verdict, "reason": reason}
    level = _level(figure.name, base, cand, alpha)
    if level is None:
        return {**row, "reason": _too_few(figure.name, base, cand, alpha)}
    test_name, base_samples, cand_samples = level
    test = mann_whitney(cand_samples, base_samples)
    p_worse, p_better = (test.p_greater, test.p_less) if figure.worse == "higher" else (test.p_less, test.p_greater)
    row.update(test=test_name, p_worse=p_worse, p_better=p_better, samples=[len(base_samples), len(cand_samples)])
    if worse_by > allowed and p_worse < alpha:
        return {**row, "verdict": "worse", "reason": f"{beyond}, p={p_worse:.2g} < {alpha:g}"}
    if -worse_by > allowed and p_better < alpha:
        return {**row, "verdict": "better", "reason": f"{beyond}, p={p_better:.2g} < {alpha:g}"}
    if abs(worse_by) <= allowed:
        return {**row, "verdict": "same", "reason": f"within the {tol.text} tolerance"}
    p = p_worse if worse_by > 0 else p_better
    return {**row, "verdict": "same", "reason": f"{beyond}, but not significant: p={p:.2g} >= {alpha:g}"}


def _level(name: str, base: Point, cand: Point, alpha: float) -> tuple[str, list[float], list[float]] | None:
    """The samples that can decide: the repeats when there are enough, else the per-second values."""
    for test, b, c in (
        ("repeats", base.repeats.get(name, []), cand.repeats.get(name, [])),
        ("intervals", base.intervals.get(name, []), cand.intervals.get(name, [])),
    ):
        if b and c and smallest_p(len(b), len(c)) < alpha:
            return test, b, c
    return None


def _too_few(name: str, base: Point, cand: Point, alpha: float) -> str:
    n1, n2 = len(base.repeats.get(name, [])), len(cand.repeats.get(name, []))
    i1, i2 = len(base.intervals.get(name, [])), len(cand.intervals.get(name, []))
    intervals = f"too few ({i1} and {i2})" if i1 or i2 else "none"
    return (
        f"too few repeats ({n1} and {n2}): {repeats_needed(alpha)} a side tell a difference at "
        f"{1 - alpha:.0%}; per-interval samples: {intervals}"
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _change(baseline: float | None, candidate: float | None) -> float | None:
    if baseline is None or candidate is None or baseline == 0:
        return None
    return round((candidate - baseline) / baseline, 4)


def change_text(row: dict) -> str:
    """A figure's move as `+149%`, or `+3` in its unit when the baseline is 0; `-` without values."""
    if row["baseline"] is None or row["candidate"] is None:
        return "-"
    if row["change"] is not None:
        return f"{row['change']:+.0%}"
    return f"{row['candidate'] - row['baseline']:+g}{row['unit']}"


def shown_p(row: dict) -> float | None:
    """The p of the test in the direction the figure moved (None without a test)."""
    if row["p_worse"] is None:
        return None
    moved_up = (row["candidate"] or 0) >= (row["baseline"] or 0)
    return row["p_worse"] if moved_up == (FIGURES[row["figure"]].worse == "higher") else row["p_better"]


def regression_line(result: dict) -> str:
    """`regression: e2e.p99 (+149%, p=0.003)` (each point's first, for campaigns), or `no regression`
    (and how many figures are undecided)."""
    found, undecided = [], 0
    for point in result["points"]:
        worse = []
        for f in point["figures"]:
            undecided += f["verdict"] == "undecided"
            if f["verdict"] == "worse":
                p = "" if f["p_worse"] is None else f", p={f['p_worse']:.2g}"
                worse.append(f"{f['figure']} ({change_text(f)}{p})")
        if worse:
            where = f"{point['label']}: " if len(result["points"]) > 1 else ""
            found.append(where + ", ".join(worse))
    if found:
        return "regression: " + "; ".join(found)
    return "no regression" + (f" ({undecided} figures undecided)" if undecided else "")
