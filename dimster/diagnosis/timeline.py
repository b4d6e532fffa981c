"""A run's diagnoses as its events tell them (`limit`, `limit_cleared`, see coordinator/loop/limit_watch.py):
in order, each from the start of load, as lines and as the stretches a prediction held."""

from dataclasses import dataclass

KINDS = ("limit", "limit_cleared")


@dataclass(frozen=True)
class Stretch:
    """From `start` to `end` (s of load) the binding limit allowed `rate` msg/s per group."""

    start: float
    end: float | None  # None: to the end of the run
    rate: float
    limit: str


def diagnoses(events: list[dict]) -> list[dict]:
    """The run's diagnosis events, each with `atSeconds` from the start of load (None when unknown)."""
    started = next((e["time"] for e in events if e.get("event") == "load_started" and "time" in e), None)
    return [
        {**e, "atSeconds": round(e["time"] - started, 1) if started is not None and "time" in e else None}
        for e in events
        if e.get("event") in KINDS
    ]


def line(d: dict) -> str:
    """One diagnosis, as `dimster explain` and the report show it."""
    at = f"+{d['atSeconds']:.0f} s" if d.get("atSeconds") is not None else "?"
    if d["event"] == "limit_cleared":
        return f"{at:>8}  none: consumption keeps up"
    if d.get("limitRate") is not None:
        levers = f"; levers: {', '.join(d['levers'])}" if d.get("levers") else ""
        return f"{at:>8}  {d['sentence']} (measured {d['measured']:,.0f}){levers}"
    allowed = ", ".join(f"{name} allows {rate:,.0f}" for name, rate in (d.get("allowed") or {}).items())
    shortfall = f"{d['measured']:,.0f} msg/s of {d['offered']:,.0f} offered"
    return f"{at:>8}  unexplained: {shortfall} ({allowed or 'no limit computed'})"


def stretches(found: list[dict]) -> list[Stretch]:
    """Where an explained diagnosis held: from its event to the next diagnosis event."""
    held = []
    for i, d in enumerate(found):
        if d["event"] == "limit" and d.get("limitRate") is not None and d.get("atSeconds") is not None:
            end = found[i + 1]["atSeconds"] if i + 1 < len(found) else None
            held.append(Stretch(d["atSeconds"], end, float(d["limitRate"]), str(d["limit"])))
    return held
