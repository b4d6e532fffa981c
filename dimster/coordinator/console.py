"""The run's status line: the same numbers `dimster status --json` gives, as one line of text."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def status_line(elapsed: float, phase: str, s: dict) -> str:
    line = (
        f"[{elapsed:6.0f}s {phase:7}] pub {s['pubRate']:>9,.0f} msg/s | cons {s['consRate']:>9,.0f} msg/s | "
        f"sent {s['sent']:>11,} | recv {s['received']:>11,} | backlog {s['backlog']:>9,} | "
        f"e2e p50 {_ms(s['e2eP50Ms'])} p99 {_ms(s['e2eP99Ms'])} | pub p99 {_ms(s['publishP99Ms'])}"
    )
    if s.get("recordsPerPoll") is not None:
        line += f" | poll avg {s['recordsPerPoll']:.1f} max {s['maxPollRecords']}"
    return line + "".join(f"  !! {w}" for w in warnings(phase, s))


def warnings(phase: str, s: dict) -> list[str]:
    found = []
    target = s["targetRate"]
    if phase == "measure" and target > 0 and s["pubRate10s"] < 0.99 * target:
        found.append(
            f"producers behind target over 10 s: {s['pubRate10s']:,.0f} of {target:,.0f} msg/s "
            "(the workers lack capacity: add workers in the environment or lower the rate)"
        )
    if s["sendErrors"]:
        found.append(f"{s['sendErrors']:,} send errors")
    if s["duplicates"]:
        found.append(f"{s['duplicates']:,} duplicates")
    return found
