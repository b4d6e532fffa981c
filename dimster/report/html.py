"""`report.html` of one summarized run: header, key numbers, charts over the run time with every
live modification and cluster event, per-partition and per-client tables, the inputs and the notes.
One self-contained file (plotly.js embedded once) that works offline."""

import json
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from dimster.modes import mode_line
from dimster.report import charts
from dimster.report.data import RunData, load_run, natural_key, parse_yaml
from dimster.report.faults import WINDOW_SECONDS, AroundFault, Window, around_faults, failed_steps, had_faults
from dimster.report.page import (
    MISSING,
    Page,
    data_table,
    decimal,
    integer,
    is_missing,
    kv_table,
    notes_box,
    panel,
    text,
    unavailable,
)

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
LATENCY_METRICS = {
    "e2e": "end to end",
    "publish": "publish (send to ack)",
    "publish_delay": "publish delay",
    "redelivery": "redelivery after a consumer crash",
}


def write_report(run_dir: Path) -> Path:
    """Write `run_dir/report.html` from the run's summary; returns its path."""
    run = load_run(run_dir)
    page = Page(f"dimster: {run.name} ({run.path.name})")
    page.add(header(run), notes_box("Notes", notes(run)), key_numbers(run), mode_panel(run))
    page.add(time_charts(run, page), faults_section(run))
    page.add(delivery_counts(run, page), partition_table(run), client_tables(run))
    page.add(broker_section(run, page))
    page.add(timeline_table(run), inputs(run))
    target = run_dir / "report.html"
    target.write_text(page.render(), encoding="utf-8")
    return target


def notes(run: RunData) -> list[str]:
    """The summary's notes, then what the report could not find."""
    found = [str(note) for note in run.summary.get("notes") or []]
    if run.run_info.get("failure"):
        found.append(f"failure: {run.run_info['failure']}")
    found += [f"missing: {part}" for part in run.missing]
    if run.load_started is None and (run.timeline.get("modifications") or run.timeline.get("events")):
        found.append("load start time unknown: modifications and events are not drawn on the charts")
    return found


def mode_panel(run: RunData) -> str:
    """A test mode's outcome and evidence: explore-limits' steps, drain-backlog's drain, the
    correctness verdict."""
    mode = run.run_info.get("mode") or {}
    if not mode_line(mode):
        return ""
    html = f"<p>{escape(mode_line(mode))}</p>"
    if mode["type"] == "explore-limits" and mode.get("steps"):
        rows = [
            [
                integer(s["step"]),
                decimal(s["rate"]),
                "pass" if s["passed"] else "fail",
                decimal(s["published_msgs_per_s"]),
                decimal(s["consumed_msgs_per_s"]),
                decimal(s["e2e_p99_ms"]),
                decimal(s["backlog_growth_msgs_per_s"]),
                text((s.get("drain") or {}).get("outcome")),
                text("; ".join(s["reasons"])),
            ]
            for s in mode["steps"]
        ]
        headers = ["step", "rate", "verdict", "published/s", "consumed/s", "e2e p99 ms", "backlog/s", "drain", "why"]
        html += data_table(headers, rows, text_columns=1)
    else:
        shown = {k: v for k, v in mode.items() if k not in ("type", "steps") and not isinstance(v, list)}
        html += kv_table((k, text(v)) for k, v in shown.items())
    return panel(f"Test mode: {mode['type']}", html)


def header(run: RunData) -> str:
    info = run.run_info
    versions = info.get("versions") or {}
    status = run.status
    badge = f'<span class="badge {escape(status)}">{escape(status)}</span>'
    fields = [
        ("environment", environment_line(run)),
        ("started", started(run)),
        ("duration", duration(run)),
        ("Kafka", text(versions.get("kafka"))),
        (
            "librdkafka / confluent-kafka",
            f"{text(versions.get('librdkafka'))} / {text(versions.get('confluent_kafka'))}",
        ),
        ("dimster / Python", f"{text(versions.get('dimster'))} / {text(versions.get('python'))}"),
        ("hardware", hardware_line(info.get("hardware") or {})),
        ("platform", text((info.get("hardware") or {}).get("platform"))),
    ]
    meta = "".join(f"<div><span>{escape(label)}</span>{value}</div>" for label, value in fields)
    return (
        f"<header><h1>{escape(run.name)}{badge}</h1>"
        f'<div class="run-id">{escape(run.path.name)}</div><div class="meta">{meta}</div></header>'
    )


def environment_line(run: RunData) -> str:
    environment = parse_yaml(run.inputs.get("environment.yaml"))
    name = run.run_info.get("environment") or environment.get("name")
    if not name:
        return MISSING
    brokers = len(run.run_info.get("brokers") or []) or environment.get("nodes")  # what the cluster registered
    details = [f"{brokers} broker(s)"] if brokers else []
    if environment.get("backend"):
        details.append(str(environment["backend"]))
    return escape(str(name)) + (f" ({escape(', '.join(details))})" if details else "")


def started(run: RunData) -> str:
    return escape(run.started.strftime("%Y-%m-%d %H:%M:%S %Z").strip()) if run.started else MISSING


def duration(run: RunData) -> str:
    end = run.run_time(run.run_info.get("ended"))
    table = run.table("throughput_per_second")
    if end is None and table is not None:
        end = float(table["second"].max()) + 1
    if end is None:
        return MISSING
    measured = (run.summary.get("throughput") or {}).get("seconds")
    suffix = f", {integer(measured)} s measured" if measured else ""
    return f"{decimal(end, 's')} of load{suffix}"


def hardware_line(hardware: dict[str, Any]) -> str:
    if not hardware:
        return MISSING
    parts = []
    if hardware.get("cpus"):
        parts.append(f"{hardware['cpus']} CPUs")
    if hardware.get("cpu_model"):
        parts.append(str(hardware["cpu_model"]))
    if hardware.get("memory_bytes"):
        parts.append(f"{float(hardware['memory_bytes']) / 2**30:.0f} GiB RAM")
    if hardware.get("hostname"):
        parts.append(f"host {hardware['hostname']}")
    return escape(", ".join(parts)) or MISSING


# ---- key numbers -------------------------------------------------------------------------------------
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
    return panel("Totals", kv_table(rows))


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
    return panel("Share outcomes", kv_table(rows) + account_table(run.summary.get("account") or {}))


ACCOUNT_TERMS = ("acked", "accepted", "rejected", "archived", "unconsumed", "in_doubt", "lost")
ACCOUNT_HINT = "acked = accepted + rejected + archived + unconsumed + in doubt + lost, each record once"


def account_table(account: dict[str, Any]) -> str:
    """Where each group's acknowledged records went; a group whose terms do not add up is flagged."""
    if not account:
        return ""
    rows = []
    for group, terms in sorted(account.items()):
        closes = "yes" if terms.get("closes") else f"no ({terms.get('unaccounted'):+,})"
        shown = text(closes) if terms.get("closes") else f'<span class="bad">{text(closes)}</span>'
        rows.append([text(group), *(integer(terms.get(term)) for term in ACCOUNT_TERMS), shown])
    headers = ["group", *(t.replace("_", " ") for t in ACCOUNT_TERMS), "closes"]
    table = data_table(headers, rows)
    return f'<p class="hint">{ACCOUNT_HINT}.</p><div class="scroll">{table}</div>'


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


# ---- charts ------------------------------------------------------------------------------------------
def time_charts(run: RunData, page: Page) -> str:
    x_range = charts.time_range(run)
    figures = [
        charts.throughput_figure(run, x_range),
        charts.backlog_figure(run, x_range),
        charts.latency_figure(run, x_range),
    ]
    body = "".join(page.figure(fig) for fig in figures if fig is not None)
    if not body:
        body = unavailable("no per-second tables in the summary")
    legend = (
        '<p class="hint">Time 0 is when load started. Shaded: warm-up and drain. Dashed orange lines: live '
        "modifications (key=new value); dotted red: brokers leaving or returning; dotted violet: redeploys; "
        "dash-dotted red: faults and their heals.</p>"
    )
    return f'<section id="charts"><h2>Over the run</h2>{legend}{body}</section>'


FAULT_HINT = (
    f"Each fault with the figures of the charts above in three windows of whole seconds of run time: the "
    f"{WINDOW_SECONDS} s before the second the fault began in; during, from that second to the one in which its "
    "heal was done (a killed node registered again, a paused one resumed), for a restart (which heals itself) the "
    f"step's own time, for a fault never healed to the end of the run; the {WINDOW_SECONDS} s after. Rates are "
    "averages over the window, e2e p99 is its worst second's, backlog and lag their highest; s without consumption "
    "is the longest stretch of seconds in the window in which nothing was consumed. A window is empty (none) at "
    "the start or past the end of the run; the windows of overlapping faults overlap."
)


def faults_section(run: RunData) -> str:
    """Throughput, latency and backlog before, during and after each fault; steps that failed listed."""
    if not had_faults(run):
        return ""
    found, failed = around_faults(run), failed_steps(run)
    parts = ['<section id="faults"><h2>Faults</h2>']
    if found:
        lag = run.table("broker_lag") is not None
        parts.append(f'<p class="hint">{escape(FAULT_HINT)}</p><div class="box">{fault_table(found, lag)}</div>')
    elif not failed:
        parts.append(unavailable("load start time unknown: the faults cannot be placed in the run"))
    if failed:
        rows = [
            [MISSING if f.at is None else f"{f.at:.1f}", text(f.node), text(f.action), text(f.message)] for f in failed
        ]
        table = data_table(["time (s)", "node", "action", "why"], rows, text_columns=4)
        parts.append(f'<h3 class="spaced">Failed steps (no row above)</h3><div class="scroll">{table}</div>')
    parts.append("</section>")
    return "".join(parts)


def fault_table(found: list[AroundFault], lag: bool) -> str:
    """A group of three rows per fault (before, during, after), the fault's own cells spanning them."""
    fault_headers = ["time (s)", "node", "action", "took (s)", "healed", "window"]
    figure_headers = ["run time (s)", "produced msg/s", "consumed msg/s", "e2e p99 ms", "backlog"]
    figure_headers += ["brokers' lag"] if lag else []
    figure_headers.append("s without consumption")
    head = "".join(f'<th class="text">{escape(h)}</th>' for h in fault_headers)
    head += "".join(f"<th>{escape(h)}</th>" for h in figure_headers)
    groups = []
    for fault in found:
        rows = []
        for name in ("before", "during", "after"):
            cells = "".join(f"<td>{cell}</td>" for cell in _window_cells(getattr(fault, name), lag))
            rows.append(f'<td class="text">{name}</td>{cells}')
        lead = "".join(f'<td class="text" rowspan="3">{cell}</td>' for cell in _fault_cells(fault))
        groups.append(f"<tbody><tr>{lead}{rows[0]}</tr><tr>{rows[1]}</tr><tr>{rows[2]}</tr></tbody>")
    return f'<table class="faults"><thead><tr>{head}</tr></thead>{"".join(groups)}</table>'


def _fault_cells(fault: AroundFault) -> list[str]:
    step, heal = fault.step, fault.heal
    if heal is not None:
        healed = f"{escape(heal.action)} at {heal.at:.1f} s, took {decimal(heal.seconds, 's')}"
    elif fault.needs_heal:
        healed = '<span class="bad">not in the run</span>'
    else:
        healed = "heals itself" if step.action == "restart" else MISSING
    action = text(step.action)
    if fault.overlapping:
        others = ", ".join(f"{other.label} at {other.at:.1f} s" for other in fault.overlapping)
        action += f'<div class="hint">with {escape(others)}</div>'
    return [f"{step.at:.1f}", text(step.node), action, decimal(step.seconds), healed]


def _window_cells(window: Window | None, lag: bool) -> list[str]:
    if window is None:
        return ["none", *[MISSING] * (6 if lag else 5)]
    idle = integer(window.without_consumption)
    if window.without_consumption:
        idle = f'<span class="bad">{idle}</span>'
    cells = [
        f"{window.start} to {window.end}",
        decimal(window.produced),
        decimal(window.consumed),
        decimal(window.e2e_p99_ms),
        integer(window.backlog),
    ]
    return [*cells, *([integer(window.brokers_lag)] if lag else []), idle]


def delivery_counts(run: RunData, page: Page) -> str:
    fig = charts.delivery_figure(run)
    if fig is None:
        return ""
    return f'<section id="delivery-counts"><h2>Delivery counts</h2>{page.figure(fig)}</section>'


def broker_section(run: RunData, page: Page) -> str:
    """What the brokers measured (their JMX metrics, scraped every 5 s): request rates and latency per
    API, purgatories and the share partitions' in-flight records."""
    requests = run.table("broker_requests")
    x_range = charts.time_range(run)
    figures = [charts.in_flight_figure(run, x_range), charts.purgatory_figure(run, x_range)]
    body = "".join(page.figure(fig) for fig in figures if fig is not None)
    if requests is not None and not requests.empty:
        rows = [
            [
                integer(r["broker"]),
                text(r["request"]),
                decimal(r.get("requests_per_s")),
                *(decimal(r.get(c)) for c in ("p50_ms", "p99_ms", "p999_ms", "p99_ms_max")),
            ]
            for r in requests.to_dict("records")
        ]
        headers = ["broker", "API", "requests/s", "total time p50 ms", "p99", "p99.9", "largest p99"]
        body = (
            '<p class="hint">Request total time as the brokers measure it (Kafka\'s decaying samples of the '
            "last minutes): the median of the scrapes in the measured phase, and the largest p99 seen.</p>"
            f'<div class="scroll">{data_table(headers, rows, text_columns=2)}</div>' + body
        )
    if not body:
        return ""
    return f'<section id="brokers"><h2>Brokers</h2>{body}</section>'


# ---- tables ------------------------------------------------------------------------------------------
def partition_table(run: RunData) -> str:
    table = run.table("latency_per_partition")
    if table is None:
        return f'<section id="partitions"><h2>Partitions</h2>{unavailable("no per-partition latencies")}</section>'
    table = table.sort_values(["topic", "partition"], key=lambda s: s.map(natural_key))
    columns = ("p50", "p90", "p99", "p99_9", "max")
    rows = [
        [text(r["topic"]), integer(r["partition"]), integer(r["count"]), *(decimal(r.get(c)) for c in columns)]
        for r in table.to_dict("records")
    ]
    headers = ["topic", "partition", "records", "e2e p50 ms", "p90", "p99", "p99.9", "max"]
    return (
        '<section id="partitions"><h2>Partitions</h2>'
        '<p class="hint">End-to-end latency per partition, measured phase.</p>'
        f'<div class="scroll">{data_table(headers, rows)}</div></section>'
    )


def client_tables(run: RunData) -> str:
    latency = run.table("latency_per_client")
    stats = run.table("client_stats")
    if latency is None and stats is None:
        return f'<section id="clients"><h2>Clients</h2>{unavailable("no per-client tables")}</section>'
    clients = _per_client(latency, stats)
    producers = clients[clients["role"] == "producer"]
    consumers = clients[clients["role"] != "producer"]
    parts = ['<section id="clients"><h2>Clients</h2>']
    if not producers.empty:
        headers = [
            "producer",
            "library",
            "records",
            "publish p50 ms",
            "p99",
            "p99.9",
            "max",
            "batch records",
            "batch bytes",
            "requests",
            "queue ms",
            "request ms",
        ]
        rows = [
            [
                text(r["client_id"]),
                text(r.get("library")),
                integer(r.get("publish count")),
                *_percentiles(r, "publish"),
                decimal(r.get("batch_records_avg")),
                integer(r.get("batch_bytes_avg")),
                integer(r.get("requests")),
                decimal(r.get("queue_time_avg_ms")),
                decimal(r.get("request_latency_avg_ms")),
            ]
            for r in producers.to_dict("records")
        ]
        table = data_table(headers, rows, text_columns=2)
        parts.append(f'<h3>Producers</h3><div class="scroll">{table}</div>')
    if not consumers.empty:
        headers = [
            "consumer",
            "role",
            "library",
            "records",
            "e2e p50 ms",
            "p99",
            "p99.9",
            "max",
            "fetch requests",
            "records per fetch",
            "bytes fetched per byte consumed",
        ]
        rows = [
            [
                text(r["client_id"]),
                text(r["role"]),
                text(r.get("library")),
                integer(r.get("records_consumed", r.get("e2e count"))),
                *_percentiles(r, "e2e"),
                integer(r.get("fetch_requests")),
                decimal(r.get("records_per_fetch")),
                decimal(r.get("rx_bytes_per_consumed_byte")),
            ]
            for r in consumers.to_dict("records")
        ]
        table = data_table(headers, rows, text_columns=3)
        parts.append(f'<h3 class="spaced">Consumers</h3><div class="scroll">{table}</div>')
    parts.append("</section>")
    return "".join(parts)


def _per_client(latency: pd.DataFrame | None, stats: pd.DataFrame | None) -> pd.DataFrame:
    """One row per client: `<metric> <percentile>` latency columns joined with the client statistics."""
    frames = []
    if latency is not None:
        wide = latency.pivot_table(
            index=["client_id", "role"],
            columns="metric",
            values=["count", *(k for k, _ in PERCENTILES)],
            aggfunc="first",
        )
        wide.columns = [f"{metric} {value}" for value, metric in wide.columns]
        frames.append(wide)
    if stats is not None:
        frames.append(stats.set_index(["client_id", "role"]))
    joined = frames[0] if len(frames) == 1 else frames[0].join(frames[1], how="outer")
    joined = joined.reset_index()
    return joined.sort_values("client_id", key=lambda s: s.map(natural_key))


def timeline_table(run: RunData) -> str:
    rows = []
    for change in run.timeline.get("modifications", []):
        x = run.run_time(change.get("applied", change.get("time")))
        detail = f"{change.get('key')}: {change.get('old')} → {change.get('new')}"
        rows.append((x, "modification", f"{detail} ({change.get('effect', '')})"))
    for event in run.timeline.get("events", []):
        details = {k: v for k, v in event.items() if k not in ("time", "event")}
        rows.append(
            (
                run.run_time(event.get("time")),
                str(event.get("event")),
                ", ".join(f"{k}: {_compact(v)}" for k, v in details.items()),
            )
        )
    if not rows:
        return f'<section id="timeline"><h2>Timeline</h2>{unavailable("no events or modifications")}</section>'
    rows.sort(key=lambda row: float("inf") if row[0] is None else row[0])
    cells = [[MISSING if x is None else f"{x:.1f}", escape(kind), escape(detail)] for x, kind, detail in rows]
    table = data_table(["time (s)", "what", "details"], cells, text_columns=3)
    return f'<section id="timeline"><h2>Timeline</h2><div class="scroll">{table}</div></section>'


def inputs(run: RunData) -> str:
    parts = ['<section id="inputs"><h2>Workload and environment</h2><div class="grid">']
    for name in ("workload.yaml", "environment.yaml", "broker-config.yaml"):
        content = run.inputs.get(name)
        body = f"<pre>{escape(content)}</pre>" if content is not None else unavailable(f"{name} is missing")
        parts.append(f"<div><h3>{escape(name)}</h3>{body}</div>")
    parts.append("</div>")
    command = run.run_info.get("command_line")
    if command:
        line = escape(" ".join(map(str, command)))
        parts.append(f'<h3 class="spaced">Command line</h3><pre class="wrap">{line}</pre>')
    parts.append("</section>")
    return "".join(parts)


# ---- helpers -----------------------------------------------------------------------------------------
def _card(label: str, value: str, unit: str = "", sub: str = "", bad: bool = False) -> str:
    """A headline number; `value` and `sub` are formatted already (MISSING when unknown)."""
    shown = f"{value} <small>{escape(unit)}</small>" if unit and value != MISSING else value
    below = f'<div class="label">{sub}</div>' if sub and sub != MISSING else ""
    return (
        f'<div class="card{" bad" if bad else ""}"><div class="label">{escape(label)}</div>'
        f'<div class="value">{shown}</div>{below}</div>'
    )


def _percentiles(row: dict[str, Any], metric: str) -> list[str]:
    return [decimal(row.get(f"{metric} {key}")) for key in ("p50", "p99", "p99_9", "max")]


def _positive(value: Any) -> bool:
    return not is_missing(value) and float(value) > 0


def _flagged(value: Any, bad: bool) -> str:
    shown = integer(value)
    return f'<span class="bad">{shown}</span>' if bad and _positive(value) else shown


def _compact(value: Any) -> str:
    """An event detail in a table cell: lists joined, everything else as JSON (true, null), shortened."""
    if isinstance(value, str):
        shown = value
    elif isinstance(value, list):
        shown = ", ".join(v if isinstance(v, str) else json.dumps(v, default=str) for v in value)
    else:
        shown = json.dumps(value, default=str)
    return shown if len(shown) <= 120 else shown[:119] + "…"
