"""The start barrier: producers start only once every consumer holds its assignment, so that no record
produced under measurement waits for a consumer still joining its group. The same watch times the
consumers a live change adds, or resumes."""

from collections import Counter

from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.coordinator.workers.topology import Topology
from dimster.kafka.groups import AssignmentWatch, GroupSpec

ASSIGNMENT_TIMEOUT = 120.0  # for every consumer to hold its assignment before load starts


def group_specs(topology: Topology, consumer_type: str, partitions: int) -> dict[str, GroupSpec]:
    """Each group of the run: its kind, topic, members now and partitions."""
    members = Counter(c.group for c in topology.consumers)
    kind = "share" if consumer_type == "SHARE_GROUP" else "consumer"
    return {group: GroupSpec(kind, topic, members[group], partitions) for group, topic in topology.groups.items()}


class AssignmentBarrier:
    def __init__(self, kafka: RunKafka, log: RunLog):
        self.kafka = kafka
        self.log = log
        self.watches: list[AssignmentWatch] = []
        self.seconds: dict[str, float] = {}  # group -> seconds its consumers took to hold assignments at start

    def watch(self, groups: dict[str, GroupSpec]) -> AssignmentWatch | None:
        """Watch the groups that have members until each member holds its assignment."""
        groups = {g: spec for g, spec in groups.items() if spec.members}
        if not groups:
            return None
        watch = self.kafka.watch_assignments(groups, ASSIGNMENT_TIMEOUT)
        self.watches.append(watch)
        return watch

    def note(self, live: bool) -> None:
        """Record each group whose consumers all hold their assignment: at the start (`live` False),
        and after a live change added consumers."""
        for watch in self.watches:
            for group, at in watch.take():
                seconds = round(at - watch.started, 3)
                if not live:
                    self.seconds[group] = seconds
                members = watch.groups[group].members
                self.log.tell(
                    "consumers_assigned",
                    f"-- group {group}: all {members} consumer(s) hold their assignment ({seconds:.1f}s)",
                    group=group,
                    members=members,
                    seconds=seconds,
                    live=live,
                )
            if watch.finished and live and watch.outcome != "done":
                self.log.tell("consumer_assignment_incomplete", f"-- {watch.outcome}", reason=watch.outcome)
        self.watches = [w for w in self.watches if not w.finished]

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()
