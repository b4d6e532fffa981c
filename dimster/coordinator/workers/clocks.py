"""How far an agent's clock is from the coordinator's, estimated NTP-style over the channel.

A probe leaves at t0 (our clock), the agent stamps t1 (its clock), the answer arrives at t3 (ours).
If the way there and the way back take as long, the agent's clock is ahead by t1 - (t0 + t3) / 2; the
error of that is at most half the round trip. Of recent samples the one with the shortest round trip
wins: it was least delayed by queues on the way, so its bound is the tightest.
"""

from collections import deque
from dataclasses import dataclass

from dimster.results.records import ClockOffset


@dataclass(frozen=True)
class ClockSample:
    offset: float  # seconds the agent's clock is ahead of ours
    round_trip: float


def clock_sample(sent: float, agent_time: float, received: float) -> ClockSample:
    return ClockSample(agent_time - (sent + received) / 2, received - sent)


class ClockEstimate:
    def __init__(self, keep: int = 30):
        self.samples: deque[ClockSample] = deque(maxlen=keep)  # probes go out every second: ~30 s of them
        self.count = 0

    def add(self, sample: ClockSample) -> None:
        self.samples.append(sample)
        self.count += 1

    @property
    def best(self) -> ClockSample | None:
        return min(self.samples, key=lambda s: s.round_trip, default=None)

    @property
    def offset(self) -> float:
        best = self.best
        return best.offset if best else 0.0

    @property
    def uncertainty(self) -> float:
        best = self.best
        return best.round_trip / 2 if best else float("inf")

    def as_record(self) -> ClockOffset:
        return {
            "offset_ms": round(self.offset * 1000, 3),
            "uncertainty_ms": round(self.uncertainty * 1000, 3) if self.best else None,
            "samples": self.count,
        }
