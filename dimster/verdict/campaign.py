"""A campaign's verdict: each point judged on the mean of its repeats' figures, from the campaign's
per-run table (campaign/summary/runs), with each repeat's value beside it (summary.json's `verdict`)."""

from functools import partial
from typing import Any

from dimster.diagnosis.generator import phase_saturated
from dimster.verdict.expressions import parse_threshold
from dimster.verdict.figures import FIGURES
from dimster.verdict.judge import judge, outcome, specs_of, undecided_because

JUDGED = ("completed", "forced")  # a point whose runs all ended so is judged


def campaign_threshold_problem(thresholds: list) -> str | None:
    """A threshold naming a figure a campaign's per-run table does not hold."""
    columns = sorted(name for name, figure in FIGURES.items() if figure.campaign_column)
    for text, _abort in specs_of(thresholds):
        try:
            names = parse_threshold(text).figures()
        except ValueError:
            continue  # the points' workloads say what is wrong with it
        for name in names:
            if FIGURES[name].campaign_column is None:
                return f"threshold '{text}': a campaign's summary has no {name} (its figures: {', '.join(columns)})"
    return None


def campaign_verdict(
    thresholds: list, points: list[dict[str, Any]], run_table: Any, judge_saturated: bool = False
) -> dict | None:
    """None without thresholds. `points`: campaign.json's records (one per point and repeat);
    `run_table`: the campaign summary's per-run table (a pandas DataFrame, a row per summarized run).
    A point a repeat of which had a saturated load generator in its measured phase has its latencies
    and rates undecided, as a run's own verdict does, unless `judge_saturated`."""
    specs = specs_of(thresholds)
    if not specs:
        return None
    records: dict[int, list[dict]] = {}
    for record in points:
        records.setdefault(int(record.get("index") or 0), []).append(record)
    judged = []
    for index, runs in sorted(records.items()):
        statuses = list(dict.fromkeys(str(r.get("status")) for r in runs))
        rows = run_table[run_table["point"] == index]
        entry: dict[str, Any] = {"point": index, "label": runs[0].get("label") or "", "status": ", ".join(statuses)}
        if any(s not in JUDGED for s in statuses) or rows.empty:
            judged.append(entry | {"passed": None, "thresholds": []})
            continue
        aborted = next((r["aborted_by"] for r in runs if r.get("aborted_by")), None)
        undecided = None if judge_saturated else _saturated_reason(rows)
        verdict = judge(specs, partial(_mean, rows), aborted, undecided)
        for result in verdict["thresholds"]:
            left = parse_threshold(result["threshold"]).left
            result["repeats"] = [left.evaluate(_values(row, left.figures())) for row in rows.to_dict("records")]
        judged.append(entry | {"passed": verdict["passed"], "thresholds": verdict["thresholds"]})
    return {"passed": all(p["passed"] for p in judged), "points": judged}


def _saturated_reason(rows: Any) -> str | None:
    """Why the point's latencies and rates cannot tell: the repeats whose load generator was saturated
    (the runs table's `generator_saturated_share`, from each run.json's `generator`)."""
    if "generator_saturated_share" not in rows:
        return None
    shares = {int(r["repeat"]): float(r["generator_saturated_share"]) for r in rows.to_dict("records")}
    saturated = {repeat: share for repeat, share in shares.items() if phase_saturated(share, 1.0)}
    if not saturated:
        return None
    which = ", ".join(f"{share:.0%} of repeat {repeat}'s" for repeat, share in sorted(saturated.items()))
    return undecided_because(f"{which} measured phase")


def point_outcome(point: dict[str, Any]) -> str:
    """A point of a campaign's verdict: `not judged` (its runs did not all complete), else its
    thresholds' outcome() (`passed`, `failed` or `undecided`)."""
    return "not judged" if point["passed"] is None else outcome(point)


def campaign_outcome(verdict: dict[str, Any]) -> str:
    """`passed`; `failed` when a point breached or was not judged; otherwise `undecided`."""
    if verdict["passed"]:
        return "passed"
    found = {point_outcome(point) for point in verdict.get("points") or []}
    return "failed" if found & {"failed", "not judged"} else "undecided"


def _mean(rows: Any, name: str) -> float | None:
    figure = FIGURES[name]
    values = rows[figure.campaign_column].dropna()
    return float(values.mean()) * figure.scale if len(values) else None


def _values(row: dict, names: list[str]) -> dict[str, float | None]:
    values = {}
    for name in names:
        value = row.get(FIGURES[name].campaign_column or "")
        values[name] = None if value is None or value != value else float(value) * FIGURES[name].scale  # NaN
    return values
