"""The report's key numbers: headline cards, then panels of throughput, totals, share outcomes with
the groups' accounts, the clients' figures and the latency percentiles of the measured phase."""

from html import escape
from typing import Any

from dimster.metrics.schema import LATENCY_METRICS as LATENCY_ROWS
from dimster.pipeline.summary import DEAD_LETTER_TOTALS
from dimster.report.data import RunData
from dimster.report.page import MISSING, data_table, decimal, integer, is_missing, kv_table, panel, text, unavailable

PERCENTILES = (
    ("p50", "p50"),
    ("p75", "p75"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99_9", "p99.9"),
    ("p99_99", "p99.99"),
    ("max", "max"),
)
LATENCY_METRICS = {m.name: m.label for m in LATENCY_ROWS}  # histogram metric -> label, in the panel's order


def key_numbers(run: RunData) -> str:
    summary = run.summary
    throughput = summary.get("throughput") or {}
    latency = summary.get("latency_ms") or {}
    totals = summary.get("totals") or run.run_info.get("totals") or {}
    e2e, publish = latency.get("e2e") or {}, latency.get("publish") or {}
    lost, duplicates = totals.get("lost"), totals.get("duplicates")
    cards = [
        _card("produced", decimal(throughput.get("produced_msgs_per_s")), "msg/s",
              sub=decimal(throughput.get("produced_mb_per_s"), "MB/s")),
        _card("consumed", decimal(throughput.get("consumed_msgs_per_s")), "msg/s",
              sub=decimal(throughput.get("consumed_mb_per_s"), "MB/s")),
        _card("e2e p50", decimal(e2e.get("p50")), "ms"),
        _card("e2e p99", decimal(e2e.get("p99")), "ms"),
        _card("e2e p99.9", decimal(e2e.get("p99_9")), "ms"),
        _card("publish p99", decimal(publish.get("p99")), "ms"),
        _card("lost", integer(lost), bad=_positive(lost)),
        _card("unconsumed", integer(totals.get("unconsumed")), bad=_positive(totals.get("unconsumed"))),
        _card("duplicates", integer(duplicates), bad=_positive(duplicates)),
    ]  # fmt: skip
    if totals.get("dead_lettered") is not None:  # a run with a dead-letter queue
        wrong = [totals.get(key) for key in DEAD_LETTER_TOTALS[1:]]
        cards.append(_card("dead_lettered", integer(totals["dead_lettered"]), sub=_wrong_dead_letters(totals),
                           bad=any(_positive(v) for v in wrong)))  # fmt: skip
    panels = [throughput_panel(run), totals_panel(totals), share_panel(run), clients_panel(run)]
    return (
        '<section id="key-numbers"><h2>Key numbers</h2>'
        '<p class="hint">Rates and latencies cover the measured phase (after warm-up); totals cover the whole run.</p>'
        f'<div class="cards">{"".join(cards)}</div><div class="grid">{"".join(panels)}</div>'
        f'<div class="grid">{latency_panel(latency)}</div></section>'
    )


def throughput_panel(run: RunData) -> str:
    throughput = run.summary.get("throughput") or {}
    polls = run.summary.get("polls") or {}
    if not throughput and not polls:
        return panel("Throughput", unavailable("no throughput in the summary"))
    return panel(
        "Throughput (measured)",
        kv_table(
            [
                ("measured seconds", integer(throughput.get("seconds"))),
                ("produced", decimal(throughput.get("produced_msgs_per_s"), "msg/s")),
                ("produced", decimal(throughput.get("produced_mb_per_s"), "MB/s")),
                ("consumed", decimal(throughput.get("consumed_msgs_per_s"), "msg/s")),
                ("consumed", decimal(throughput.get("consumed_mb_per_s"), "MB/s")),
                ("polls", integer(polls.get("polls"))),
                ("records per poll", decimal(polls.get("records_per_poll"))),
                ("most records in a poll", integer(polls.get("max_records_in_a_poll"))),
            ]
        ),
    )


def totals_panel(totals: dict[str, Any]) -> str:
    if not totals:
        return panel("Totals", unavailable("run.json has no totals"))
    rows = [
        (label, _flagged(totals.get(key), bad=key in ("lost", "duplicates", "send_errors")))
        for key, label in (
            ("sent", "sent"),
            ("acked", "acknowledged"),
            ("send_errors", "send errors"),
            ("received", "received"),
            ("lost", "lost"),
            ("unconsumed", "unconsumed (still in the topic)"),
            ("duplicates", "duplicates"),
            ("backlog", "backlog at the end"),
        )
    ]
    if totals.get("dead_lettered") is not None:
        rows += [(key, _flagged(totals.get(key), bad=key != "dead_lettered")) for key in DEAD_LETTER_TOTALS]
    return panel("Totals", kv_table(rows))


def _wrong_dead_letters(totals: dict[str, Any]) -> str:
    """The card's line under dead_lettered: the missing and duplicated ones, where there are any."""
    return ", ".join(
        f"{integer(totals[key])} {word}"
        for key, word in (("dead_letter_missing", "missing"), ("dead_letter_duplicates", "duplicated"))
        if _positive(totals.get(key))
    )


def share_panel(run: RunData) -> str:
    outcomes = run.summary.get("share_outcomes") or {}
    if run.workload.get("consumerType", "SHARE_GROUP") != "SHARE_GROUP":
        return panel("Share outcomes", '<p class="hint">Consumer groups: records are not acknowledged one by one.</p>')
    if not outcomes:
        return panel("Share outcomes", unavailable("no share outcomes in the summary"))
    rows = [
        ("accepted", integer(outcomes.get("accepted"))),
        ("released", integer(outcomes.get("released"))),
        ("rejected", integer(outcomes.get("rejected"))),
        ("archived by the broker", integer(outcomes.get("archived"))),
        ("lock renewals", integer(outcomes.get("renewed"))),
        ("lock time-outs", integer(outcomes.get("lock_timeouts"))),
    ]
    counts = run.summary.get("delivery_counts") or {}
    redelivered = sum(int(v) for k, v in counts.items() if str(k) != "1")
    if counts:
        rows.append(("delivered more than once", integer(redelivered)))
    if queue := run.summary.get("dead_letter_queue") or run.run_info.get("deadLetterQueue"):
        rows += [
            ("dead-letter topic", text(queue.get("topic"))),
            ("dead letters hold", text("the record" if queue.get("copyRecord") else "metadata only")),
            ("dead-letter topic made by", text("dimster" if queue.get("createTopic") else "the broker")),
        ]
    return panel("Share outcomes", kv_table(rows) + account_table(run.summary.get("account") or {}))


ACCOUNT_TERMS = ("acked", "accepted", "rejected", "archived", "unconsumed", "in_doubt", "lost")
ACCOUNT_HINT = "acked = accepted + rejected + archived + unconsumed + in doubt + lost, each record once"


DEAD_LETTER_HINT = (
    "dead_lettered: the group's records found in the dead-letter topic, each once; dead_letter_missing: "
    "records it rejected, or the broker archived on their last delivery, not found there; "
    "dead_letter_duplicates: extra copies found there"
)


def account_table(account: dict[str, Any]) -> str:
    """Where each group's acknowledged records went; a group whose terms do not add up is flagged. With
    a dead-letter queue, the group's records found there, and those missing or duplicated (flagged)."""
    if not account:
        return ""
    dead_letters = [t for t in DEAD_LETTER_TOTALS if any(g.get(t) is not None for g in account.values())]
    rows = []
    for group, terms in sorted(account.items()):
        closes = "yes" if terms.get("closes") else f"no ({terms.get('unaccounted'):+,})"
        shown = text(closes) if terms.get("closes") else f'<span class="bad">{text(closes)}</span>'
        queue = [_flagged(terms.get(t), bad=t != "dead_lettered") for t in dead_letters]
        rows.append([text(group), *(integer(terms.get(term)) for term in ACCOUNT_TERMS), shown, *queue])
    headers = ["group", *(t.replace("_", " ") for t in ACCOUNT_TERMS), "closes", *dead_letters]
    table = data_table(headers, rows)
    hint = f"{ACCOUNT_HINT}. {DEAD_LETTER_HINT}" if dead_letters else ACCOUNT_HINT
    return f'<p class="hint">{escape(hint)}.</p><div class="scroll">{table}</div>'


def milliseconds(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def clients_panel(run: RunData) -> str:
    ratios = run.summary.get("client_stats") or {}
    workload = run.workload
    rows = []
    if workload.get("producersPerTopic") is not None and workload.get("topics") is not None:
        rows.append(("producers", integer(workload["producersPerTopic"] * workload["topics"])))
    if workload.get("consumersPerGroup") is not None:
        groups = (workload.get("groupsPerTopic") or 1) * (workload.get("topics") or 1)
        rows.append(("consumers", integer(workload["consumersPerGroup"] * groups)))
    if libraries := workload.get("clientLibrary"):
        rows.append(("client libraries", text(", ".join(f"{role} {lib}" for role, lib in libraries.items()))))
    java_clients = (run.run_info.get("versions") or {}).get("java_clients")
    if isinstance(java_clients, dict) and java_clients:  # a string in runs from before clientVersion
        rows.append(("Java clients", text(", ".join(f"{role} {v}" for role, v in java_clients.items()))))
    if not ratios:
        return panel("Clients", kv_table(rows) + unavailable("no client statistics in the summary"))
    rows += [
        ("producer batch (records)", decimal(ratios.get("producer_batch_records_avg"))),
        ("producer batch (bytes)", integer(ratios.get("producer_batch_bytes_avg"))),
        ("producer queue time (ms)", decimal(ratios.get("producer_queue_time_ms_avg"))),
        ("producer request latency (ms)", decimal(ratios.get("producer_request_latency_ms_avg"))),
        ("consumer request latency (ms)", decimal(ratios.get("consumer_request_latency_ms_avg"))),
        ("consumer fetch requests", integer(ratios.get("consumer_fetch_requests"))),
        ("records per fetch", decimal(ratios.get("records_per_fetch"))),
        ("bytes fetched per byte consumed", decimal(ratios.get("rx_bytes_per_consumed_byte"))),
    ]
    compression = run.summary.get("compression") or {}
    cpu = run.summary.get("worker_cpu") or {}
    rows += [
        ("payload bytes per byte the brokers took in", decimal(compression.get("ratio"))),
        ("producer compression rate (Java)", decimal(ratios.get("producer_compression_rate_avg"))),
        ("workers' CPU (cores)", decimal(cpu.get("cores"))),
        ("workers' memory (MB, resident)", integer(cpu.get("memory_mb"))),
        ("workers' threads", integer(cpu.get("threads"))),
        ("producer CPU ms per MB", decimal(milliseconds(cpu.get("producer_cpu_seconds_per_mb")))),
        ("consumer CPU ms per MB", decimal(milliseconds(cpu.get("consumer_cpu_seconds_per_mb")))),
    ]
    return panel("Clients", kv_table(rows))


def latency_panel(latency: dict[str, Any]) -> str:
    if not latency:
        return panel("Latency (ms)", unavailable("no latencies in the summary"))
    rows = []
    for metric, stats in sorted(
        latency.items(), key=lambda item: list(LATENCY_METRICS).index(item[0]) if item[0] in LATENCY_METRICS else 99
    ):
        stats = stats or {}
        label = LATENCY_METRICS.get(metric, metric)
        rows.append([escape(label), integer(stats.get("count")), *(decimal(stats.get(k)) for k, _ in PERCENTILES)])
    table = data_table(["metric", "count", *(label for _, label in PERCENTILES)], rows)
    return panel("Latency (ms), measured phase", table)


def _card(label: str, value: str, unit: str = "", sub: str = "", bad: bool = False) -> str:
    """A headline number; `value` and `sub` are formatted already (MISSING when unknown)."""
    shown = f"{value} <small>{escape(unit)}</small>" if unit and value != MISSING else value
    below = f'<div class="label">{sub}</div>' if sub and sub != MISSING else ""
    return (
        f'<div class="card{" bad" if bad else ""}"><div class="label">{escape(label)}</div>'
        f'<div class="value">{shown}</div>{below}</div>'
    )


def _positive(value: Any) -> bool:
    return not is_missing(value) and float(value) > 0


def _flagged(value: Any, bad: bool) -> str:
    shown = integer(value)
    return f'<span class="bad">{shown}</span>' if bad and _positive(value) else shown
