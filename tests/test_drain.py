"""When a run's drain ends (coordinator/loop/drain.py): settled; or, for a share group, every unsettled record
in doubt, no fault unhealed, and a reading of the brokers taken after that moment with a lag of 0 on
every partition of every group."""

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.loop.drain import LOOK_EVERY, DrainWatch
from dimster.kafka.groups import LagSample
from dimster.workload.model import Workload

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Drain:
    """A drain over group `g` of topic `t` (2 partitions): `acked` records, `settled` of them settled,
    `doubt` in doubt; the brokers' readings are whatever the test appends to `lag`."""

    def __init__(self, consumer_type: str = "SHARE_GROUP", acked: int = 10, settled: int = 7, doubt: int = 3):
        self.aggregate = RunAggregate({"g": "t"})
        self.aggregate.acked_by_topic["t"] = acked
        self.aggregate.settled_by_group["g"] = settled
        self.aggregate.doubt = lambda group: doubt  # type: ignore[method-assign]
        self.lag: list[LagSample] = []
        self.healed = True
        self.clock = Clock()
        workload = Workload.model_validate({"name": "w", "partitionsPerTopic": 2, "consumerType": consumer_type})
        broker_lag = lambda: self.lag[-1] if self.lag else None  # noqa: E731
        self.watch = DrainWatch(self.aggregate, broker_lag, lambda: self.healed, workload, clock=self.clock)

    def read(self, lags: dict[int, int], at: float | None = None) -> None:
        """A reading of the brokers now (or at `at`): partition -> lag."""
        self.lag.append(LagSample(self.clock.now if at is None else at, {"g": {p: (0, n) for p, n in lags.items()}}))

    def later(self, seconds: float = LOOK_EVERY) -> bool:
        self.clock.now += seconds
        return self.watch.done()


def test_a_drain_with_nothing_unsettled_is_done_settled():
    drain = Drain(settled=10, doubt=0)
    assert drain.watch.done() and drain.watch.ended() == {"backlog": 0, "ended_by": "settled"}


def test_records_not_in_doubt_are_waited_for_whatever_the_brokers_say():
    drain = Drain(settled=5, doubt=3)  # 2 unsettled and not in doubt
    assert not drain.watch.done()
    drain.read({0: 0, 1: 0})
    assert not drain.later() and drain.watch.awaited() == 2 and drain.watch.ended()["ended_by"] == "timeout"


def test_every_unsettled_record_in_doubt_ends_on_a_later_reading_with_no_lag_on_any_partition():
    drain = Drain()
    drain.read({0: 0, 1: 0}, at=drain.clock.now - 1)  # read before all were in doubt: proves nothing
    assert not drain.watch.done()
    drain.read({0: 0, 1: 0}, at=drain.clock.now)  # read at that very moment: neither
    assert not drain.later()
    drain.read({0: 2, 1: -2})  # a partition still holds records for the group, whatever the sum
    assert not drain.later()
    drain.read({0: 0})  # a partition missing from the reading
    assert not drain.later()
    drain.read({0: 0, 1: 0})
    assert drain.later()
    assert drain.watch.ended() == {"backlog": 3, "ended_by": "brokers: nothing left to deliver"}


def test_no_reading_counts_while_a_fault_is_unhealed_nor_one_taken_before_the_heal():
    drain = Drain()
    drain.healed = False  # a node still paused or restarting: its records may come back
    drain.read({0: 0, 1: 0})
    assert not drain.later()
    drain.read({0: 0, 1: 0})
    assert not drain.later()
    drain.healed = True
    assert not drain.later()  # the reading of the moment before: not after all were in doubt, healed
    drain.clock.now += 0.5
    drain.read({0: 0, 1: 0})
    assert drain.later()


def test_a_consumer_group_ends_only_settled_or_at_its_time_out():
    drain = Drain(consumer_type="CONSUMER_GROUP")
    assert not drain.watch.done()
    drain.read({0: 0, 1: 0})
    assert not drain.later(1000)


def test_what_is_in_doubt_is_looked_at_once_a_second_at_most(monkeypatch):
    drain = Drain()
    looks = []
    doubt = drain.aggregate.doubt
    monkeypatch.setattr(drain.aggregate, "doubt", lambda group: looks.append(group) or doubt(group))
    for _ in range(20):  # a loop pass every 0.2 s for 4 s
        drain.later(0.2)
    assert 4 <= len(looks) <= 5  # one group, looked at once a second
