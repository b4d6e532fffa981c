"""The run's status line: the same numbers `dimster status --json` gives, as one line of text. Its
segments name status fields of the one status schema (status_schema.py)."""

import string

from dimster.coordinator.status_schema import FIELDS
from dimster.metrics.schema import WAITING_NOTED

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


def field_names(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def status_line(elapsed: float, phase: str, s: dict) -> str:
    values = {k: (ms_text(v) if k in MILLISECONDS else v) for k, v in s.items()}
    segments = [*SEGMENTS, POLLS] if s.get("recordsPerPoll") is not None else SEGMENTS
    line = f"[{elapsed:6.0f}s {phase:7}] " + " | ".join(segment.format_map(values) for segment in segments)
    return line + "".join(f"  !! {w}" for w in warnings(phase, s))


def ms_text(value: float | None) -> str:
    """A latency in ms as the console and `dimster status` print it; `-` when there is none."""
    return "-" if value is None else f"{value:.1f} ms"


def warnings(phase: str, s: dict) -> list[str]:
    found = []
    target = s["targetRate"]
    if phase == "measure" and target > 0 and s["pubRate10s"] < 0.99 * target:
        found.append(
            f"producers behind target over 10 s: {s['pubRate10s']:,.0f} of {target:,.0f} msg/s "
            "(the producers' workers or the brokers lack capacity: add workers, --workers N, or lower the rate)"
        )
    waited = s.get("workerWaitShare")
    if phase in ("warmup", "measure") and waited is not None and waited >= WAITING_NOTED:
        found.append(
            f"a worker's threads waited to run {waited:.0%} of the time: the figures include that wait "
            "(add workers, --workers N, or hosts, or lower the load)"
        )
    if s["sendErrors"]:
        found.append(f"{s['sendErrors']:,} send errors")
    if s["duplicates"]:
        found.append(f"{s['duplicates']:,} duplicates")
    return found
