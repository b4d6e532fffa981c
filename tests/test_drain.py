"""When a run's drain ends (coordinator/drain.py): settled, or every unsettled record in doubt and the
brokers saying nothing is left, or a share group's record lock passed with none of them back."""

import pytest

from dimster.coordinator.aggregate import RunAggregate
from dimster.coordinator.drain import DrainWatch
from dimster.kafka.groups import LagSample
from dimster.workload.model import Workload

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watch(consumer_type: str = "SHARE_GROUP", acked: int = 10, settled: int = 7, doubt: int = 3):
    """A drain over one group `g` of topic `t`: `acked` records, `settled` of them settled, `doubt` in doubt;
    its lag readings are whatever the test puts in `lag`."""
    aggregate = RunAggregate({"g": "t"})
    aggregate.acked_by_topic["t"] = acked
    aggregate.settled_by_group["g"] = settled
    aggregate.in_doubt_by_group["g"] = doubt
    workload = Workload.model_validate({"name": "w", "reportIntervalSeconds": 1, "consumerType": consumer_type})
    lag: list[LagSample] = []
    clock = Clock()
    drain = DrainWatch(aggregate, lambda: lag[-1] if lag else None, workload, clock=clock)
    drain.lock_seconds = 15
    return drain, aggregate, lag, clock


def sample(at: float, lag: int) -> LagSample:
    return LagSample(at, {"g": {0: (100, lag)}})


def test_a_drain_with_nothing_unsettled_is_done_settled():
    drain, *_ = watch(settled=10, doubt=0)
    assert drain.done() and drain.ended() == {"backlog": 0, "ended_by": "settled"}


def test_records_not_in_doubt_are_waited_for_whatever_the_brokers_say():
    drain, _, lag, clock = watch(settled=5, doubt=3)  # 2 unsettled and not in doubt
    lag.append(sample(clock.now + 1, 0))
    clock.now += 100
    assert not drain.done() and drain.awaited() == 2


def test_every_unsettled_record_in_doubt_ends_on_a_reading_after_that_moment_with_no_lag():
    drain, _, lag, clock = watch()
    lag.append(sample(clock.now - 1, 0))  # read before every unsettled record was in doubt: proves nothing
    assert not drain.done()
    clock.now += 2
    lag.append(sample(clock.now, 3))  # the brokers still hold records for the group
    assert not drain.done()
    clock.now += 5
    lag.append(sample(clock.now, 0))
    assert drain.done()
    assert drain.ended() == {"backlog": 3, "ended_by": "brokers: nothing left to deliver"}


def test_a_share_group_ends_once_a_record_lock_and_two_reports_passed_with_none_back():
    drain, aggregate, lag, clock = watch()
    assert not drain.done()
    clock.now += 10
    aggregate.settled_by_group["g"] += 1  # one came back and settled: the lock's time starts again
    aggregate.in_doubt_by_group["g"] -= 1
    assert not drain.done()
    clock.now += 16.9  # 15 s lock + 2 s of reports, less 0.1 s
    lag.append(sample(clock.now, 2))
    assert not drain.done()
    clock.now += 0.1
    assert drain.done() and drain.ended() == {"backlog": 2, "ended_by": "a record lock passed"}


def test_a_consumer_group_ends_early_only_on_the_brokers_word():
    drain, _, lag, clock = watch(consumer_type="CONSUMER_GROUP")
    assert not drain.done()
    clock.now += 1000
    lag.append(sample(clock.now, 1))
    assert not drain.done() and drain.ended()["ended_by"] == "timeout"
    clock.now += 1
    lag.append(sample(clock.now, 0))
    assert drain.done()
