"""What a run's test mode found (run.json's `mode`), in the words the console and the report use."""


def mode_line(mode: dict) -> str:
    """What a test mode found, in one line ('' for a plain run)."""
    kind = mode.get("type")
    if kind == "explore-limits":
        return f"explore-limits: {mode.get('verdict')} over {mode.get('step_count')} step(s)"
    if kind == "drain-backlog":
        rate, seconds = mode.get("drain_msgs_per_s"), mode.get("drain_seconds")
        pace = f" at {rate:,.0f} msg/s" if rate else ""
        empty = f", empty {seconds:.2f} s after the consumers resumed" if seconds is not None else ""
        return f"drain-backlog: {mode.get('outcome')}, {mode.get('backlog') or 0:,} records{pace}{empty}"
    if kind == "correctness":
        verdict = "passed" if mode.get("passed") else "FAILED: " + ", ".join(mode.get("reasons") or [])
        return f"correctness {verdict}"
    return ""
