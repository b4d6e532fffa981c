"""`report.html` of one summarized run: header, key numbers, charts over the run time with every
live modification and cluster event, per-partition and per-client tables, the inputs and the notes.
One self-contained file (plotly.js embedded once) that works offline."""

import json
from html import escape
from pathlib import Path
from typing import Any

from dimster.diagnosis.timeline import diagnoses, line
from dimster.report import charts
from dimster.report.clients import client_tables, partition_table
from dimster.report.data import RunData, load_run, parse_yaml
from dimster.report.faults_section import faults_section
from dimster.report.key_numbers import key_numbers
from dimster.report.page import (
    MISSING,
    Page,
    data_table,
    decimal,
    integer,
    kv_table,
    notes_box,
    panel,
    text,
    unavailable,
)
from dimster.report.share_records import dead_letter_requests_figure, dead_letter_table, share_records_figure
from dimster.report.verdict_panel import verdict_panel
from dimster.workload.modes import mode_line, mode_panel


def write_report(run_dir: Path) -> Path:
    """Write `run_dir/report.html` from the run's summary; returns its path."""
    run = load_run(run_dir)
    page = Page(f"dimster: {run.name} ({run.path.name})")
    page.add(header(run), verdict_panel(run.summary), notes_box("Notes", notes(run)), key_numbers(run))
    page.add(mode_section(run))
    page.add(time_charts(run, page), tuning_section(run), limits_section(run), faults_section(run))
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


def mode_section(run: RunData) -> str:
    """A test mode's outcome and evidence: explore-limits' steps, drain-backlog's drain, the
    correctness verdict."""
    mode = run.run_info.get("mode") or {}
    if not mode_line(mode):
        return ""
    html = f"<p>{escape(mode_line(mode))}</p>"
    table = mode_panel(mode)
    if table:
        formats = {"integer": integer, "decimal": decimal, "text": text}
        rows = [[formats[kind](value) for kind, value in zip(table.kinds, row, strict=True)] for row in table.rows]
        html += data_table(table.headers, rows, text_columns=1)
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
        "modifications (key=new value), dashed teal: those of dimster tune; dotted red: brokers leaving or returning; "
        "dotted violet: redeploys; "
        "dash-dotted red: faults and their heals; long-dashed red: the rate a binding limit allowed (see below).</p>"
    )
    return f'<section id="charts"><h2>Over the run</h2>{legend}{body}</section>'


TUNE_EVENTS = {
    "tune_step": "step",
    "tune_model_off": "model off",
    "tune_remeasure": "measured again",
    "tune_redeploy": "broker redeploy",
}


def tuning_section(run: RunData) -> str:
    """`dimster tune`'s path through the levers, as its events told it; each change is on the charts."""
    rows = [
        [escape(TUNE_EVENTS[kind]), decimal(run.run_time(event.get("time")), "s"), text(event.get("message"))]
        for event in run.timeline.get("events", [])
        if (kind := str(event.get("event"))) in TUNE_EVENTS
    ]
    if not rows:
        return ""
    hint = (
        '<p class="hint">The path dimster tune took: each step\'s limit, lever, and rate predicted against '
        "measured. Each change is drawn on the rate and latency charts above (dashed teal, tune: key=value); "
        "the run's results hold tuned-workload.yaml, broker-config.yaml and tuning.json.</p>"
    )
    table = data_table(["", "at", "what"], rows, text_columns=1)
    title = "<h2>Tuning: the path through the levers</h2>"
    return f'<section id="tuning">{title}{hint}<div class="box">{table}</div></section>'


def limits_section(run: RunData) -> str:
    """The run's diagnoses of what limited its share groups (`dimster explain`)."""
    found = diagnoses(run.timeline.get("events", []))
    if not found:
        return ""
    listed = notes_box("Diagnoses, from the start of load", [line(d) for d in found])
    return f'<section id="limits"><h2>What limited the share groups</h2>{listed}</section>'


def delivery_counts(run: RunData, page: Page) -> str:
    fig = charts.delivery_figure(run)
    if fig is None:
        return ""
    return f'<section id="delivery-counts"><h2>Delivery counts</h2>{page.figure(fig)}</section>'


def broker_section(run: RunData, page: Page) -> str:
    """What the brokers measured (their JMX metrics, scraped every 5 s): request rates and latency per
    API, purgatories, the share partitions' in-flight records, the records acknowledged and
    dead-lettered, and the dead letters' produce requests."""
    requests = run.table("broker_requests")
    x_range = charts.time_range(run)
    figures = [
        charts.in_flight_figure(run, x_range),
        share_records_figure(run, x_range),
        dead_letter_requests_figure(run, x_range),
        charts.purgatory_figure(run, x_range),
    ]
    body = dead_letter_table(run) + "".join(page.figure(fig) for fig in figures if fig is not None)
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


def _compact(value: Any) -> str:
    """An event detail in a table cell: lists joined, everything else as JSON (true, null), shortened."""
    if isinstance(value, str):
        shown = value
    elif isinstance(value, list):
        shown = ", ".join(v if isinstance(v, str) else json.dumps(v, default=str) for v in value)
    else:
        shown = json.dumps(value, default=str)
    return shown if len(shown) <= 120 else shown[:119] + "…"
