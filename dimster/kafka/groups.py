"""Share and consumer groups as the group coordinator sees them, through Kafka's Java Admin
(confluent-kafka has no share-group admin): when every member of a group holds its assignment, and
how many records of its topic a group has yet to consume."""

import json
import queue
import threading
import time
from dataclasses import dataclass

from dimster.clock import Deadline
from dimster.errors import DimsterError
from dimster.kafka.distribution import KafkaDistribution
from dimster.kafka.helper import HelperTask, KafkaHelper
from dimster.kafka.security import ClientSecurity


def json_lines(stream):
    """The JSON objects a helper prints, one per line (any other line is skipped)."""
    for line in stream:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def drain(pending: queue.Queue) -> list:
    """Everything in the queue now."""
    taken = []
    while True:
        try:
            taken.append(pending.get_nowait())
        except queue.Empty:
            return taken


@dataclass(frozen=True)
class GroupSpec:
    kind: str  # "share" | "consumer"
    topic: str
    members: int  # how many members the run gives the group now
    partitions: int

    def to_json(self) -> dict:
        return {"kind": self.kind, "topic": self.topic, "members": self.members, "partitions": self.partitions}


def _specs(groups: dict[str, GroupSpec]) -> str:
    return json.dumps({g: spec.to_json() for g, spec in groups.items()})


def _watch(
    distribution: KafkaDistribution,
    task: str,
    bootstrap: str,
    seconds: float,
    groups: dict[str, GroupSpec],
    security: ClientSecurity,
) -> HelperTask:
    """A task of the Java helper that runs beside the run (await-assignment, watch-lag) and answers in
    JSON lines; `seconds` is its time-out or interval. It ends when closed."""
    helper = KafkaHelper(distribution)
    return helper.task(task, bootstrap, str(int(seconds * 1000)), _specs(groups), security=security)


class AssignmentWatch:
    """Waits in a background helper process until every member of each group holds its assignment.
    `take()` returns the groups assigned since the last call, as (group, epoch seconds); `outcome`
    is None while it waits, then "done" or the reason it gave up."""

    def __init__(
        self,
        distribution: KafkaDistribution,
        bootstrap: str,
        groups: dict[str, GroupSpec],
        timeout: float,
        security: ClientSecurity = None,
    ):
        self.groups = groups
        self.started = time.time()
        self.outcome: str | None = None
        self._assigned: queue.Queue[tuple[str, float]] = queue.Queue()
        self._task = _watch(distribution, "await-assignment", bootstrap, timeout, groups, security)
        self._reader = threading.Thread(target=self._read, name="assignment-watch", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for answer in json_lines(self._task.lines()):
            if "group" in answer:
                self._assigned.put((answer["group"], answer["assignedAtMs"] / 1000))
            elif answer.get("done"):
                self.outcome = "done"
            elif answer.get("timeout"):
                pending = "; ".join(f"{g}: {why}" for g, why in answer["pending"].items())
                self.outcome = f"not every consumer holds an assignment ({pending})"
        if self.outcome is None:
            why = "; ".join(self._task.errors) or f"code {self._task.returncode}"
            self.outcome = f"the assignment watch ended: {why}"

    def take(self) -> list[tuple[str, float]]:
        return drain(self._assigned)

    @property
    def finished(self) -> bool:
        """The helper has ended and every line it printed was read."""
        return self.outcome is not None and self._assigned.empty()

    def stop(self) -> None:
        self._task.close()


@dataclass(frozen=True)
class LagSample:
    """The groups' positions as the brokers see them at one moment."""

    at: float  # epoch seconds
    groups: dict[str, dict[int, tuple[int, int]]]  # group -> partition -> (start offset, lag)

    def lag(self, group: str) -> int:
        return sum(lag for _, lag in self.groups.get(group, {}).values())


class LagWatch:
    """Reads every group's start offset and lag per partition from the brokers every `interval`
    seconds (KIP-1226's share-partition lag through the Admin API), in a background helper process
    that ends when its stdin closes. `take()` returns the samples since the last call; `read_now()`
    has one read at once."""

    def __init__(
        self,
        distribution: KafkaDistribution,
        bootstrap: str,
        groups: dict[str, GroupSpec],
        interval: float,
        security: ClientSecurity = None,
    ):
        self.errors: queue.Queue[str] = queue.Queue()
        self._samples: queue.Queue[LagSample] = queue.Queue()
        self._last: tuple[int, LagSample | str] | None = None  # the last answer's start (ms) and outcome
        self._answered = threading.Condition()
        self._task = _watch(distribution, "watch-lag", bootstrap, interval, groups, security)
        self._ended = False
        threading.Thread(target=self._read, name="lag-watch", daemon=True).start()

    def _read(self) -> None:
        for answer in json_lines(self._task.lines()):
            outcome: LagSample | str
            if "error" in answer:
                error: str = answer["error"]
                self.errors.put(error)
                outcome = error
            else:
                groups = {
                    group: {int(p): (int(v["start"]), int(v["lag"])) for p, v in partitions.items()}
                    for group, partitions in answer.get("groups", {}).items()
                }
                outcome = LagSample(answer["atMs"] / 1000, groups)
                self._samples.put(outcome)
            with self._answered:
                self._last = (int(answer["atMs"]), outcome)
                self._answered.notify_all()
        with self._answered:
            self._ended = True
            self._answered.notify_all()  # the watch ended: no answer will come

    def take(self) -> list[LagSample]:
        return drain(self._samples)

    def read_now(self, timeout: float) -> LagSample:
        """A reading the helper starts after this call (it is asked for one at once; `take()` returns it
        too). Raises DimsterError when the cluster does not answer it or none comes within `timeout` s."""
        asked_ms = int(time.time() * 1000)  # the helper runs on this host: one clock
        deadline = Deadline(timeout)
        try:
            self._task.ask()
        except OSError:
            raise DimsterError("the groups' positions could not be read: the lag watch has ended") from None
        with self._answered:
            while self._last is None or self._last[0] < asked_ms:
                left = deadline.left()
                if left <= 0:
                    raise DimsterError(f"the groups' positions were not read within {timeout:.0f} s")
                if self._ended:
                    raise DimsterError("the groups' positions could not be read: the lag watch has ended")
                self._answered.wait(min(left, 1.0))
            outcome = self._last[1]
        if isinstance(outcome, str):
            raise DimsterError(f"the groups' positions could not be read: {outcome}")
        return outcome

    def stop(self) -> None:
        self._task.close()
