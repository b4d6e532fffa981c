"""flowControl (KAFKA-7548's experiment): which partitions a consumer-group member pauses before a
poll, and the workload rules of the key."""

import random

import pytest

from dimster.errors import DimsterError
from dimster.workload.flow_control import partitions_to_pause
from dimster.workload.model import FlowControl, parse_workload

pytestmark = pytest.mark.unit
TEN = list(range(10))


def flow(fraction: float, pattern: str = "random") -> FlowControl:
    return FlowControl.model_validate({"pausedFraction": fraction, "pattern": pattern})


def test_random_pauses_9_of_10_and_a_different_choice_each_poll():
    rng = random.Random(7)
    choices = [partitions_to_pause(TEN, flow(0.9), poll, rng) for poll in range(50)]
    assert all(len(c) == 9 and c <= set(TEN) for c in choices)
    assert len({frozenset(c) for c in choices}) > 5  # the one partition left to fetch moves around
    assert set().union(*(set(TEN) - c for c in choices)) == set(TEN)  # every partition gets its turn


def test_rotate_moves_the_paused_window_one_partition_a_poll():
    paused = [partitions_to_pause([3, 4, 5, 6], flow(0.5, "rotate"), poll, random.Random()) for poll in range(5)]
    assert paused == [{3, 4}, {4, 5}, {5, 6}, {6, 3}, {3, 4}]


@pytest.mark.parametrize(
    ("assigned", "fraction", "count"), [([0], 0.9, 0), ([0, 1], 0.9, 1), (TEN, 0.0, 0), (TEN, 0.3, 3)]
)
def test_one_partition_is_always_left_to_fetch(assigned, fraction, count):
    assert len(partitions_to_pause(assigned, flow(fraction), 1, random.Random())) == count


def test_nothing_to_pause_without_partitions():
    assert partitions_to_pause([], flow(0.9), 1, random.Random()) == set()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"consumerType": "SHARE_GROUP", "flowControl": {"pausedFraction": 0.5}}, "flowControl needs consumerType"),
        ({"consumerType": "CONSUMER_GROUP", "flowControl": {"pausedFraction": 1}}, "pausedFraction"),
        ({"consumerType": "CONSUMER_GROUP", "flowControl": {"pattern": "zigzag"}}, "pattern"),
    ],
)
def test_bad_flow_control_is_one_line(keys, message):
    with pytest.raises(DimsterError, match=message):
        parse_workload({"name": "w", **keys}, "w.yaml")
