"""When a run's drain may end. It ends once every acknowledged record is settled. A record in doubt (its
acknowledgement answered with an error or never answered, or a lost worker's) may never settle: the
broker may have applied what dimster never heard of. So once every unsettled record is in doubt, the
drain ends when the brokers say the groups have nothing left to deliver (their lag, read after that
moment, is 0), or, for a share group, once a record lock and two reports passed with none back (a
record whose acknowledgement the broker lost comes back when its lock runs out). Waiting longer
could not settle more: the records stay in doubt by name in the account."""

import time
from collections.abc import Callable

from dimster.coordinator.aggregate import RunAggregate
from dimster.kafka.groups import LagSample
from dimster.workload.model import Workload

DEFAULT_LOCK_SECONDS = 30.0  # group.share.record.lock.duration.ms's default, until the broker's is known


class DrainWatch:
    def __init__(
        self,
        aggregate: RunAggregate,
        broker_lag: Callable[[], LagSample | None],
        workload: Workload,
        clock: Callable[[], float] = time.time,
    ):
        self.aggregate = aggregate
        self.broker_lag = broker_lag  # the brokers' latest reading of the groups' lag (None: none yet)
        self.report_seconds = workload.report_interval_seconds
        # a consumer group's records come back after a rebalance, not a lock: only its lag ends a drain early
        self.share = workload.consumer_type == "SHARE_GROUP"
        self.lock_seconds = DEFAULT_LOCK_SECONDS
        self.clock = clock  # epoch seconds, the clock of the lag readings
        self._all_in_doubt: tuple[int, float] | None = None  # (records in doubt, since when)
        self.ended_by = "timeout"

    def awaited(self) -> int:
        """Unsettled records that are not in doubt: those the drain waits for."""
        by_group = self.aggregate.backlog_by_group()
        return sum(max(0, n - self.aggregate.doubt(group)) for group, n in by_group.items())

    def done(self) -> bool:
        if self.aggregate.backlog == 0:
            self.ended_by = "settled"
            return True
        if self.awaited():
            self._all_in_doubt = None
            return False
        doubt, now = sum(map(self.aggregate.doubt, self.aggregate.groups)), self.clock()
        if self._all_in_doubt is None or self._all_in_doubt[0] != doubt:  # one came back: wait again
            self._all_in_doubt = (doubt, now)
        since = self._all_in_doubt[1]
        lag = self.broker_lag()
        if lag is not None and lag.at > since and sum(map(lag.lag, self.aggregate.groups)) == 0:
            self.ended_by = "brokers: nothing left to deliver"
        elif self.share and now - since >= self.lock_seconds + 2 * self.report_seconds:
            self.ended_by = "a record lock passed"
        else:
            return False
        return True

    def ended(self) -> dict:
        """For the drain_ended event: what was left and why the drain ended."""
        return {"backlog": self.aggregate.backlog, "ended_by": self.ended_by}
