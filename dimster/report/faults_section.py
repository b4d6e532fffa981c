"""The report's faults section: each fault with the run's figures before, during and after it (from
report/faults.py), and the fault steps that failed."""

from html import escape

from dimster.report.data import RunData
from dimster.report.faults import WINDOW_SECONDS, AroundFault, Window, around_faults, failed_steps, had_faults
from dimster.report.page import MISSING, data_table, decimal, integer, text, unavailable

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
