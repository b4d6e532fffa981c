"""Where dimster's load generator could not keep its schedule (diagnosis/generator.py), drawn on the
latency chart: over those spans the latencies measure the worker as well as Kafka."""

import plotly.graph_objects as go

from dimster.report.data import RunData

SATURATED = "generator saturated"


def saturated_spans(run: RunData) -> list[tuple[float, float]]:
    """(start, end) in run time of each stretch between `generator_saturated` and the next
    `generator_keeps_up` (or the run's end)."""
    spans, start, end_of_run = [], None, None
    for event in run.timeline.get("events", []):
        x, kind = run.run_time(event.get("time")), event.get("event")
        if x is None:
            continue
        if kind == "generator_saturated" and start is None:
            start = x
        elif kind == "generator_keeps_up" and start is not None:
            spans.append((start, x))
            start = None
        elif kind in ("drain_ended", "run_ended"):
            end_of_run = x if end_of_run is None else end_of_run
    if start is not None:
        spans.append((start, end_of_run if end_of_run is not None and end_of_run > start else start + 1.0))
    return spans


def shade_saturated(fig: go.Figure, run: RunData, x_range: tuple[float, float]) -> None:
    """A red band over each saturated span, labelled at its top."""
    for start, end in saturated_spans(run):
        if end <= x_range[0] or start >= x_range[1]:
            continue
        fig.add_vrect(
            x0=max(start, x_range[0]),
            x1=min(end, x_range[1]),
            fillcolor="#e03131",
            opacity=0.12,
            line_width=0,
            layer="below",
            annotation_text=SATURATED,
            annotation_position="top left",
            annotation_font={"size": 11, "color": "#c92a2a"},
        )
