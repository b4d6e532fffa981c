"""Thresholds judged while load runs: each one's value over the measured phase so far (`dimster status
--json`), and which `abortOnFail` threshold can no longer pass. Latencies come from the measured
phase's merged histograms, rates from each worker's counts over the time its measured reports
covered; counts are the run's so far (as the end's totals are); a figure known only at the end
(`lost`, `unconsumed`) has no value until then. The end's verdict is the summary's, not this."""

from collections import Counter, defaultdict
from collections.abc import Callable

import numpy as np

from dimster.metrics.histogram import Histogram
from dimster.verdict.expressions import Comparison, parse_threshold
from dimster.verdict.figures import BYTE_RATE, FIGURES, MSG_RATE, TIME, status_value
from dimster.verdict.judge import Spec
from dimster.worker.protocol import IntervalReport

RATE_COUNTS = {"produced": "sent", "consumed": "received"}  # a rate figure's object -> its count
LATENCY_METRICS = ("e2e", "publish", "publish_delay", "redelivery")
MAXIMA = {"brokerLag.max": "brokerLag", "backlog.max": "backlog"}  # status key whose max they are


class LiveJudge:
    def __init__(self, specs: list[Spec]):
        self.specs: list[tuple[Comparison, bool]] = [(parse_threshold(text), abort) for text, abort in specs]
        self.named = {name for comparison, _ in self.specs for name in comparison.figures()}
        wanted = {name.split(".")[0] for name in self.named}
        self.latency = {metric: Histogram() for metric in LATENCY_METRICS if metric in wanted}
        self.counts: dict[int, Counter] = {}  # worker -> measured counts (sent, received and their bytes)
        self.seconds: dict[int, float] = defaultdict(float)  # worker -> seconds its measured reports covered
        self.last_end: dict[int, float] = {}
        self.maxima: dict[str, float] = {}
        self.checked = 0.0  # when check() last read the status

    @property
    def abortable(self) -> bool:
        return any(abort for _, abort in self.specs)

    def take(self, report: IntervalReport, phase: str, load_started: float) -> None:
        """A report (a line per worker): each worker's counts and time, when the report ends in the
        measured phase."""
        if not self.specs:
            return
        ends = [line.end_time for line in report.lines]
        since = [max(self.last_end.get(line.worker_index, 0.0), load_started) for line in report.lines]
        self.last_end.update((line.worker_index, line.end_time) for line in report.lines)
        if phase != "measure" or not load_started:
            return
        owner, clients, lines = report.client_line, report.clients, len(report.lines)
        names = ("sent", "sent_bytes", "received", "received_bytes")
        by_line = [np.bincount(owner, weights=clients.count(name), minlength=lines).tolist() for name in names]
        for k, line in enumerate(report.lines):
            self.seconds[line.worker_index] += max(0.0, ends[k] - since[k])
            counts = self.counts.setdefault(line.worker_index, Counter())
            counts.update({name: round(values[k]) for name, values in zip(names, by_line, strict=True)})
        merged = report.histograms.by_metric
        for metric, latency in self.latency.items():
            if metric in merged:
                latency.merge_wire(merged[metric])

    def check(self, phase: str, status: Callable[[], dict], now: float) -> tuple[str, float] | None:
        """Once a second while load runs: note the measured phase's maxima of the brokers' lag and the
        backlog, and return the first abortOnFail threshold already broken (its figure only grows, so
        for good), with its value."""
        if not (self.abortable or self.named & set(MAXIMA)) or now - self.checked < 1.0:
            return None
        self.checked = now
        numbers = status()
        for figure, key in MAXIMA.items():
            if phase == "measure" and isinstance(numbers.get(key), int | float):
                self.maxima[figure] = max(self.maxima.get(figure, 0.0), float(numbers[key]))
        for comparison, abort in self.specs:
            if abort:
                left, _, held = comparison.judge({name: self.value(name, numbers) for name in comparison.figures()})
                if held is False and left is not None:
                    return comparison.text, left
        return None

    def value(self, name: str, status: dict) -> float | None:
        figure = FIGURES[name]
        what, _, stat = name.partition(".")
        if figure.dim == TIME and what in self.latency:
            histogram = self.latency[what]
            value = histogram.max if stat == "max" else histogram.percentile(float(stat[1:]))
            return None if value is None or not histogram.total else value / 1000  # us -> ms
        if figure.dim in (MSG_RATE, BYTE_RATE) and what in RATE_COUNTS:
            key = RATE_COUNTS[what] + ("_bytes" if figure.dim == BYTE_RATE else "")
            scale = 1e6 if figure.dim == BYTE_RATE else 1.0
            rates = [c[key] / self.seconds[w] for w, c in self.counts.items() if self.seconds[w]]
            return sum(rates) / scale if rates else None
        if name == "measured.seconds":
            return max(self.seconds.values(), default=0.0) * 1000
        if name in MAXIMA:
            return self.maxima.get(name)
        return status_value(figure, status)

    def status(self, status: dict) -> list[dict]:
        """Each threshold now: its value, its bound, and whether it holds so far (None: no value yet)."""
        answers = []
        for comparison, abort in self.specs:
            left, right, held = comparison.judge({name: self.value(name, status) for name in comparison.figures()})
            answers.append(
                {
                    "threshold": comparison.text,
                    "value": left,
                    "bound": right,
                    "unit": comparison.unit,
                    "passing": held,
                    "abortOnFail": abort,
                }
            )
        return answers
