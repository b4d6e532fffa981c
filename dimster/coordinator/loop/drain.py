"""When a run's drain may end. It ends once every acknowledged record is settled. A record in doubt (its
acknowledgement answered with an error or never answered, as through a broker's restart, or a lost
worker's) may never settle: the broker may have applied what dimster never heard of. So for share
groups, once every unsettled record is in doubt and no fault is left unhealed, the drain ends when a
reading of the brokers taken after that moment gives every partition of every group a lag of 0: the
share partitions' state, as the share coordinator keeps it, holds no record that could still be
delivered or acknowledged (KIP-1226; a state not yet written can only make the lag larger). A
consumer group's drain ends as before: settled, or at its time-out."""

import time
from collections.abc import Callable

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.kafka.groups import LagSample
from dimster.workload.model import Workload

LOOK_EVERY = 1.0  # seconds between looks at what is in doubt (a look walks every record in doubt)
SETTLED, BROKERS, TIMEOUT = "settled", "brokers: nothing left to deliver", "timeout"


class DrainWatch:
    """Whether the drain may end (`done`, asked every loop pass) and why it ended (`ended`)."""

    def __init__(
        self,
        aggregate: RunAggregate,
        broker_lag: Callable[[], LagSample | None],
        healed: Callable[[], bool],
        workload: Workload,
        clock: Callable[[], float] = time.time,
    ):
        self.aggregate = aggregate
        self.broker_lag = broker_lag  # the brokers' latest reading of the groups' lag (None: none yet)
        self.healed = healed  # no fault of the run left unhealed
        self.partitions = workload.partitions_per_topic  # of each group's topic
        self.share = workload.consumer_type == "SHARE_GROUP"
        self.clock = clock  # epoch seconds, the clock of the lag readings (the helper runs on this host)
        self._all_in_doubt_since: float | None = None
        self._looked = float("-inf")
        self.ended_by = TIMEOUT

    def awaited(self) -> int:
        """Unsettled records that are not in doubt: those the drain waits for."""
        by_group = self.aggregate.backlog_by_group()
        return sum(max(0, n - self.aggregate.doubt(group)) for group, n in by_group.items())

    def done(self) -> bool:
        if self.aggregate.backlog == 0:
            self.ended_by = SETTLED
            return True
        now = self.clock()
        if not self.share or now - self._looked < LOOK_EVERY:
            return False
        self._looked = now
        if self.awaited() or not self.healed():
            self._all_in_doubt_since = None
            return False
        if self._all_in_doubt_since is None:
            self._all_in_doubt_since = now
        lag = self.broker_lag()
        if lag is None or lag.at <= self._all_in_doubt_since or not self._nothing_left(lag):
            return False
        self.ended_by = BROKERS
        return True

    def _nothing_left(self, lag: LagSample) -> bool:
        """Every partition of every group in the reading, each with a lag of 0."""
        readings = [lag.groups.get(group, {}) for group in self.aggregate.groups]
        return all(len(by_partition) >= self.partitions for by_partition in readings) and all(
            partition_lag == 0 for by_partition in readings for _, partition_lag in by_partition.values()
        )

    def ended(self) -> dict:
        """For the drain_ended event: what was left and why the drain ended."""
        return {"backlog": self.aggregate.backlog, "ended_by": self.ended_by}
