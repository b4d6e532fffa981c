"""The figures a threshold or a comparison may name, once: each figure's unit, which way is worse,
where summary.json holds it (and a campaign's per-run table), and what a workload needs to have it.

Names are `object.stat` (`e2e.p99`, `publish.p99.9`, `consumed.rate`, `brokerLag.max`) or run.json's
totals (`lost`, `dead_lettered`). Values are in canonical units: ms, msg/s, MB/s, or plain numbers."""

from dataclasses import dataclass

TIME, MSG_RATE, BYTE_RATE, NUMBER = "time", "msgrate", "byterate", "number"
UNITS = {TIME: "ms", MSG_RATE: "msg/s", BYTE_RATE: "MB/s", NUMBER: ""}
# what a workload must have for a figure to exist (checked by verdict/spec.py)
# (consumer crashes need a share group: `--modify --set crashConsumers=1` crashes one live)
CONSUMERS, SHARE, DEAD_LETTERS, CORRECTNESS, GROUPS = (
    "consumers", "a share group", "a deadLetterQueue", "mode: correctness", "groups",
)  # fmt: skip


@dataclass(frozen=True)
class Figure:
    name: str
    dim: str  # TIME | MSG_RATE | BYTE_RATE | NUMBER
    worse: str  # "higher" | "lower": which way a change is a regression
    source: str  # its dotted path in summary.json
    grows: bool = False  # only grows while load runs: once past a bound, it cannot come back
    campaign_column: str | None = None  # in a campaign's summary/runs table
    needs: str | None = None  # what the workload must have (one of CONSUMERS, SHARE, ...)
    live: str | None = None  # its key in status --json while load runs, when it has one
    scale: float = 1.0  # summary value x scale = canonical value

    @property
    def unit(self) -> str:
        return UNITS[self.dim]


LATENCY_STATS = ("p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99", "max")
CAMPAIGN_LATENCIES = {
    "e2e.p50": "e2e_p50_ms",
    "e2e.p99": "e2e_p99_ms",
    "e2e.p99.9": "e2e_p99_9_ms",
    "publish.p99": "publish_p99_ms",
}
LATENCY_NEEDS = {"e2e": CONSUMERS, "publish": None, "publish_delay": None, "redelivery": SHARE}


# the status --json keys of the rates and latencies the console shows as load runs (the last seconds')
STATUS_KEYS = {
    "produced.rate": "pubRate",
    "consumed.rate": "consRate",
    "e2e.p50": "e2eP50Ms",
    "e2e.p99": "e2eP99Ms",
    "publish.p99": "publishP99Ms",
}


def _latencies() -> list[Figure]:
    figures = []
    for metric, needs in LATENCY_NEEDS.items():
        for stat in LATENCY_STATS:
            name = f"{metric}.{stat}"
            source = f"latency_ms.{metric}.{stat.replace('.', '_')}"
            grows, column = stat == "max", CAMPAIGN_LATENCIES.get(name)
            figures.append(Figure(name, TIME, "higher", source, grows, column, needs, STATUS_KEYS.get(name)))
    return figures


# throughput over the measured phase: (name, unit, summary key, needs); the campaign's column is the key
RATES = (
    ("produced.rate", MSG_RATE, "produced_msgs_per_s", None),
    ("consumed.rate", MSG_RATE, "consumed_msgs_per_s", CONSUMERS),
    ("produced.byteRate", BYTE_RATE, "produced_mb_per_s", None),
    ("consumed.byteRate", BYTE_RATE, "consumed_mb_per_s", CONSUMERS),
)


def _rates() -> list[Figure]:
    rates = [
        Figure(name, dim, "lower", f"throughput.{key}", False, key, needs, STATUS_KEYS.get(name))
        for name, dim, key, needs in RATES
    ]
    seconds = Figure("measured.seconds", TIME, "lower", "throughput.seconds", False, "measured_seconds", scale=1000.0)
    return [*rates, seconds]


# run.json totals: (name, worse, grows while load runs, needs, status key, in a campaign's runs table)
TOTALS = (
    ("sent", "lower", True, None, "sent", True),
    ("acked", "lower", True, None, "acked", True),
    ("received", "lower", True, CONSUMERS, "received", True),
    ("duplicates", "higher", True, CONSUMERS, "duplicates", True),
    ("send_errors", "higher", True, None, "sendErrors", False),
    ("lost", "higher", False, CONSUMERS, "lost", True),
    ("unconsumed", "higher", False, CONSUMERS, "unconsumed", True),
    ("in_doubt", "higher", False, CONSUMERS, None, False),
    ("accepted", "lower", True, SHARE, None, False),
    ("released", "higher", True, SHARE, None, False),
    ("rejected", "higher", True, SHARE, None, False),
    ("archived", "higher", True, SHARE, None, False),
    ("renewed", "higher", True, SHARE, "lockRenewals", False),
    ("lock_timeouts", "higher", True, SHARE, "lockTimeouts", False),
    ("consumer_crashes", "higher", True, SHARE, None, False),
    ("redelivered_after_crash", "higher", True, SHARE, None, False),
    ("dead_lettered", "higher", True, DEAD_LETTERS, "dead_lettered", True),
    ("dead_letter_missing", "higher", False, DEAD_LETTERS, "dead_letter_missing", True),
    ("dead_letter_duplicates", "higher", False, DEAD_LETTERS, "dead_letter_duplicates", True),
)


def _totals() -> list[Figure]:
    return [
        Figure(name, NUMBER, worse, f"totals.{name}", grows, name if in_campaign else None, needs, live)
        for name, worse, grows, needs, live, in_campaign in TOTALS
    ]


def _others() -> list[Figure]:
    return [
        Figure("corrupt", NUMBER, "higher", "mode.corrupt", True, "mode_corrupt", CORRECTNESS),
        Figure("out_of_order", NUMBER, "higher", "mode.out_of_order", True, "mode_out_of_order", CORRECTNESS),
        Figure("brokerLag.max", NUMBER, "higher", "broker_lag_total.max", True, needs=GROUPS, live="brokerLag"),
        Figure("brokerLag.end", NUMBER, "higher", "broker_lag_total.end", needs=GROUPS, live="brokerLag"),
        Figure("backlog.max", NUMBER, "higher", "backlog.max", True, needs=CONSUMERS, live="backlog"),
        Figure("backlog.end", NUMBER, "higher", "backlog.end", needs=CONSUMERS, live="backlog"),
    ]


FIGURES: dict[str, Figure] = {f.name: f for f in (*_latencies(), *_rates(), *_totals(), *_others())}


def summary_value(figure: Figure, summary: dict) -> float | None:
    """The figure's value in a summary.json, in canonical units; None where the summary has none."""
    value: object = summary
    for key in figure.source.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) * figure.scale


def status_value(figure: Figure, status: dict) -> float | None:
    """The figure's value in a status snapshot (status --json) as load runs; None where it has none."""
    value = status.get(figure.live) if figure.live else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
