"""The run's status line: the same numbers `dimster status --json` gives, as one line of text. Its
segments name status fields of the one status schema (status_schema.py)."""

import string
from collections import deque
from collections.abc import Mapping
from typing import Any

from dimster.coordinator.control.status_schema import FIELDS
from dimster.diagnosis.generator import console_line

MILLISECONDS = {f.name for f in FIELDS if f.scale == 1e-3}  # shown as "12.3 ms", "-" while unknown
SEGMENTS = (
    "pub {pubRate:>9,.0f} msg/s",
    "cons {consRate:>9,.0f} msg/s",
    "sent {sent:>11,}",
    "recv {received:>11,}",
    "backlog {backlog:>9,}",
    "e2e p50 {e2eP50Ms} p99 {e2eP99Ms}",
    "pub p99 {publishP99Ms}",
)
POLLS = "poll avg {recordsPerPoll:.1f} max {maxPollRecords}"  # consumers only
DEAD_LETTERS = "dlq {dead_lettered:,}"  # runs with a dead-letter queue only
LIVE_WITHIN = 5.0  # s: a worker whose latest report is this far behind the newest no longer holds the cut back
KEPT = 64  # reports kept per worker (one a second; a line reads the last few)


class OneInstant:
    """The workers' cumulative counts at one instant, for the status line: each worker's latest report
    ends at another time, so summing them shows consumers ahead of producers on other workers. The
    line is cut at the last instant every live worker has reported (the earliest of their latest
    reports); each worker's counts are interpolated between its reports around it. O(1) a report."""

    def __init__(self) -> None:
        self.history: dict[int, deque[tuple[float, tuple[float, ...]]]] = {}  # worker -> (end time, counts)

    def note(self, worker: int, end: float, counts: tuple[int, ...], since: float = 0.0) -> None:
        """A worker's report covering `since` (its first report: from load start) to `end` added
        `counts` (deltas, in a fixed order)."""
        history = self.history.setdefault(worker, deque(maxlen=KEPT))
        if not history and 0 < since < end:
            history.append((since, (0,) * len(counts)))
        before = history[-1][1] if history else (0,) * len(counts)
        history.append((end, tuple(a + b for a, b in zip(before, counts, strict=True))))

    def cut(self) -> float:
        """The last instant every live worker has reported (0 before any report)."""
        latest = [history[-1][0] for history in self.history.values()]
        newest = max(latest, default=0.0)
        return min((end for end in latest if end >= newest - LIVE_WITHIN), default=0.0)

    def counts(self, at: float, size: int) -> list[int]:
        """The workers' counts summed as of `at`; reports older than the one at or before it are dropped."""
        total = [0.0] * size
        for history in self.history.values():
            while len(history) > 1 and history[1][0] <= at:
                history.popleft()
            end, counts = history[0]
            if end > at:  # its first kept report is after the cut: nothing yet (or its oldest kept counts)
                if len(history) == KEPT:
                    total = [t + c for t, c in zip(total, counts, strict=True)]
                continue
            if len(history) > 1:  # between two reports: as if it went on at an even pace
                later, after = history[1]
                share = (at - end) / (later - end)
                counts = tuple(c + share * (a - c) for c, a in zip(counts, after, strict=True))
            total = [t + c for t, c in zip(total, counts, strict=True)]
        return [round(t) for t in total]


def field_names(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def status_line(elapsed: float, phase: str, s: dict, planned: float | None = None) -> str:
    """The console's line: seconds of load, of `planned` where the run's length is known, the phase,
    then the window's figures and warnings."""
    values = {k: (ms_text(v) if k in MILLISECONDS else v) for k, v in s.items()}
    segments = [*SEGMENTS, POLLS] if s.get("recordsPerPoll") is not None else [*SEGMENTS]
    if s.get("dead_lettered") is not None:
        segments.append(DEAD_LETTERS)
    seconds = f"{elapsed:6.0f}s" + (f"/{planned:.0f}s" if planned else "")
    line = f"[{seconds} {phase:7}] " + " | ".join(segment.format_map(values) for segment in segments)
    return line + "".join(f"  !! {w}" for w in warnings(phase, s))


def dead_letter_counts(s: Mapping[str, Any]) -> list[str]:
    """`dead_lettered N`, then `dead_letter_missing N` and `dead_letter_duplicates N` where not 0 (they
    are known at the end); none for a run without a dead-letter queue. Of a status or run.json's totals."""
    if s.get("dead_lettered") is None:
        return []
    keys = ("dead_lettered", *(k for k in ("dead_letter_missing", "dead_letter_duplicates") if s.get(k)))
    return [f"{key} {s[key]:,}" for key in keys]


def ms_text(value: float | None) -> str:
    """A latency in ms as the console and `dimster status` print it; `-` when there is none."""
    return "-" if value is None else f"{value:.1f} ms"


LOAD_PHASES = ("warmup", "measure", "drain")  # the phases whose windows measure load


def warnings(phase: str, s: dict) -> list[str]:
    found = []
    target = s["targetRate"]
    if phase == "measure" and target > 0 and s["pubRate10s"] < 0.99 * target:
        found.append(
            f"producers behind target over 10 s: {s['pubRate10s']:,.0f} of {target:,.0f} msg/s "
            "(the producers' workers or the brokers lack capacity: add workers, --workers N, or lower the rate)"
        )
    if phase in ("warmup", "measure") and s.get("generator"):
        found.append(console_line(s["generator"]))
    if phase in LOAD_PHASES and s.get("overdue"):
        late = ", ".join(f"worker {w} for {seconds:.1f} s" for w, seconds in sorted(s["overdue"].items()))
        found.append(f"no report from {late}: this line lacks its clients (held from running, or its link is slow)")
    if s["sendErrors"]:
        found.append(f"{s['sendErrors']:,} send errors")
    if s["duplicates"]:
        found.append(f"{s['duplicates']:,} duplicates")
    return found
