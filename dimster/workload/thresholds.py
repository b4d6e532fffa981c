"""`thresholds`: what a run's figures must meet to pass (issue 36). Each is an expression of
verdict/expressions.py, checked when the workload is read; `abortOnFail` stops the run as soon as the
threshold cannot pass any more, which only a figure that grows while load runs can say."""

from pydantic import Field, field_validator, model_serializer, model_validator

from dimster.verdict.expressions import Comparison, parse_threshold
from dimster.verdict.figures import CONSUMERS, CORRECTNESS, DEAD_LETTERS, FIGURES, GROUPS, SHARE
from dimster.workload.strict import Strict

ABORTABLE = ("<", "<=", "==")


class Threshold(Strict):
    threshold: str
    abort_on_fail: bool = Field(False, alias="abortOnFail")

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data):
        if isinstance(data, str):
            return {"threshold": data}
        if not isinstance(data, dict):
            raise ValueError("a threshold is a text, as 'e2e.p99 < 50ms', or a mapping {threshold, abortOnFail}")
        return data

    @field_validator("threshold")
    @classmethod
    def _parses(cls, text: str) -> str:
        parse_threshold(text)  # a ValueError names what is wrong
        return text

    @model_validator(mode="after")
    def _abortable(self):
        if self.abort_on_fail and (why := abort_problem(self.comparison)):
            raise ValueError(why)
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler):
        return handler(self) if self.abort_on_fail else self.threshold

    @property
    def comparison(self) -> Comparison:
        return parse_threshold(self.threshold)


def abort_problem(comparison: Comparison) -> str | None:
    """Why a threshold cannot stop a run early: only `FIGURE < BOUND` (or <=, ==) on a figure that only
    grows while load runs is certain to fail for good once broken."""
    figure = comparison.left.figure
    if figure and comparison.op in ABORTABLE and not comparison.right.figures() and FIGURES[figure].grows:
        return None
    growing = ", ".join(name for name, f in FIGURES.items() if f.grows and "." not in name)
    return (
        f"abortOnFail needs 'FIGURE < BOUND' (or <=, ==) on a figure that only grows while load runs "
        f"({growing}, and the maxima: e2e.max, brokerLag.max ...): '{comparison.text}' can still pass"
    )


def threshold_problem(
    thresholds: list[Threshold], consumers: bool, share: bool, dead_letters: bool, correctness: bool
) -> str | None:
    """A threshold naming a figure this workload's runs cannot have."""
    has = {CONSUMERS: consumers, GROUPS: consumers, SHARE: share and consumers}
    has |= {DEAD_LETTERS: dead_letters, CORRECTNESS: correctness}
    for i, threshold in enumerate(thresholds):
        for name in threshold.comparison.figures():
            needs = FIGURES[name].needs
            if needs and not has.get(needs, True):
                return f"thresholds[{i}] '{threshold.threshold}': {name} needs {needs}, which this workload has not"
    return None
