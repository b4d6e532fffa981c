"""When dimster's own load generator is the limit: a worker that cannot keep its clients' schedule. Its
threads wait to run (for a core, or for the interpreter's lock), its process uses nearly every core it
may, or the hypervisor gives its host's cores to other guests (steal). Its producers then hand records
to their Kafka client well after the records were due (publish delay), a figure the reasons add; alone
it is no sign of the generator: a client its broker holds back (no leader, a full buffer) is late
too, and that is Kafka's answer, not dimster's wait. Over such a window the latencies
and rates measure the worker as much as Kafka: the console says so, the run records it per worker and
phase, and verdicts on latencies and rates of such a phase are undecided.

Pure functions of what a worker reports over one window (a console window, or a whole phase)."""

from collections.abc import Iterable
from dataclasses import dataclass

from dimster.metrics.schema import WAITING_NOTED

WAIT_SHARE = WAITING_NOTED  # of the time its wake probe waited to run (an idle worker's: 1-3 %)
CPU_SHARE = 0.90  # of the cores the worker may use
STEAL_SHARE = 0.10  # of the host's core time given to other guests
PUBLISH_DELAY_MS = 50.0  # the producers' p99 lateness (intended send time to handed over), said beside a sign
SATURATED_PHASE_SHARE = 0.10  # a phase whose time was saturated this much is a saturated phase
LEVERS = (
    "more workers (--workers N, or workers: N in the environment)",
    "fewer clients a worker",
    "clientLibrary librdkafka where it serves",
    "more hosts (agents) when this one's cores are busy",
)


@dataclass(frozen=True)
class WorkerLoad:
    """One worker over one window."""

    worker: int
    seconds: float  # the time its reports covered
    waited: float = 0.0  # seconds its wake probe waited to run
    cpu: float = 0.0  # CPU seconds of its process
    steal: float = 0.0  # the host's steal seconds, summed over its cores
    cores: int = 0  # the cores it may use (0: not reported)
    publish_delay_p99_ms: float | None = None  # of its producers (None: none produced)

    @property
    def wait_share(self) -> float:
        return min(1.0, self.waited / self.seconds) if self.seconds else 0.0

    @property
    def cpu_cores(self) -> float:
        return self.cpu / self.seconds if self.seconds else 0.0

    @property
    def steal_share(self) -> float:
        return min(1.0, self.steal / (self.seconds * self.cores)) if self.seconds and self.cores else 0.0

    def reasons(self) -> list[str]:
        """Why the worker could not keep its schedule, in words; empty when it could (producers behind
        schedule with none of the worker's own signs are held back by Kafka: empty too)."""
        found = []
        if self.wait_share >= WAIT_SHARE:
            found.append(f"its threads waited {self.wait_share:.0%} of the time to run")
        if self.cores and self.cpu_cores >= CPU_SHARE * self.cores:
            found.append(f"its CPU at {self.cpu_cores:.1f} of {self.cores} cores")
        if self.steal_share >= STEAL_SHARE:
            found.append(f"its host's steal time {self.steal_share:.0%}")
        if found and self.publish_delay_p99_ms is not None and self.publish_delay_p99_ms >= PUBLISH_DELAY_MS:
            found.append(f"its producers {self.publish_delay_p99_ms:,.0f} ms behind schedule at p99")
        return found

    def to_json(self) -> dict:
        return {
            "worker": self.worker,
            "wait_share": round(self.wait_share, 4),
            "cpu_cores": round(self.cpu_cores, 3),
            "cores": self.cores,
            "steal_share": round(self.steal_share, 4),
            "publish_delay_p99_ms": None if self.publish_delay_p99_ms is None else round(self.publish_delay_p99_ms, 2),
            "reasons": self.reasons(),
        }


def saturated(loads: Iterable[WorkerLoad]) -> list[WorkerLoad]:
    """The workers that could not keep their schedule, most waited first."""
    return sorted((load for load in loads if load.reasons()), key=lambda load: -load.wait_share)


def sentence(load: dict) -> str:
    """`worker 0: its threads waited 23 % of the time to run, its CPU at 1.8 of 2 cores` (`load`: a
    WorkerLoad's to_json())."""
    return f"worker {load['worker']}: {', '.join(load['reasons'])}"


def console_line(loads: list[dict]) -> str:
    """The console's warning for a window whose generator was saturated (`loads`: to_json() of the
    saturated() ones)."""
    workers = "; ".join(sentence(load) for load in loads)
    return (
        f"the load generator is saturated ({workers}): latencies and rates include dimster's own wait, "
        f"not only Kafka's ({', '.join(LEVERS[:3])})"
    )


def phase_saturated(saturated_seconds: float, seconds: float) -> bool:
    """A phase is saturated when its generator was, for at least SATURATED_PHASE_SHARE of its time."""
    return seconds > 0 and saturated_seconds >= SATURATED_PHASE_SHARE * seconds
