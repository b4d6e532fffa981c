"""Producer rates over time: a constant rate or a schedule of constant and ramp segments."""

from dimster.workload.model import RateSchedule, RateSegment


def _ramp(segment: RateSegment) -> tuple[float, float]:
    """The from and to rates of a segment without `rate` (the model's validator requires both there)."""
    assert segment.from_rate is not None and segment.to_rate is not None
    return segment.from_rate, segment.to_rate


def rate_at(schedule: RateSchedule | None, constant_rate: float, elapsed: float) -> float:
    """Total target rate (msg/s) `elapsed` seconds after load started."""
    if schedule is None:
        return constant_rate
    total = sum(s.duration_seconds for s in schedule.segments)
    if schedule.type == "REPEATING":
        elapsed %= total
    elif elapsed >= total:
        last = schedule.segments[-1]
        return last.rate if last.rate is not None else _ramp(last)[1]
    for segment in schedule.segments:
        if elapsed < segment.duration_seconds:
            if segment.rate is not None:
                return segment.rate
            share = elapsed / segment.duration_seconds
            from_rate, to_rate = _ramp(segment)
            return from_rate + (to_rate - from_rate) * share
        elapsed -= segment.duration_seconds
    # float rounding: `elapsed` can be below `total` yet past the last segment (5.86 + 8.33 + 7.9 sums
    # to 22.090000000000003, so 22.09 falls through): that instant is the end of the last segment
    last = schedule.segments[-1]
    return last.rate if last.rate is not None else _ramp(last)[1]


class Pacer:
    """Turns a rate that may change at any moment into due times for messages.

    Each `due(now, rate)` call returns the intended send times of the messages that fell due since
    the previous call, at the rate in force over that span. A message's intended time is when it
    was due, not when it was sent, so a slow sender shows up as publish delay (no coordinated omission).
    """

    def __init__(self, start: float):
        self.last = start
        self.credit = 0.0  # fractional messages carried over

    def due(self, now: float, rate: float, limit: int = 100_000) -> list[float]:
        if now <= self.last or rate <= 0:
            self.last = max(self.last, now)
            self.credit = 0.0 if rate <= 0 else self.credit
            return []
        span = now - self.last
        total = self.credit + span * rate
        count = min(int(total), limit)
        times = [self.last + (i + 1 - self.credit) / rate for i in range(count)]
        if count == limit:  # far behind: resume from the last returned message, nothing is skipped
            self.last, self.credit = times[-1], 0.0
        else:
            self.last, self.credit = now, total - count
        return times

    def next_due(self, rate: float) -> float:
        """When the next message falls due if the rate holds."""
        if rate <= 0:
            return self.last + 0.05
        return self.last + (1 - self.credit) / rate
