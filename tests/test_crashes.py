"""Which consumers a crash picks, when a scheduled crash is due, and what `crashConsumers` and
`restartConsumers` accept."""

import re

import pytest

from dimster.coordinator.live.crashes import crash_count, due_crashes, restart_count, victims
from dimster.errors import DimsterError
from dimster.workload.model import parse_workload

pytestmark = pytest.mark.unit

SHARE = parse_workload(
    {"name": "w", "consumersPerGroup": 3, "consumerCrashes": [{"atSeconds": 5}, {"atSeconds": 9, "consumers": 2}]}, "t"
)


def test_crashes_take_turns_over_the_consumers():
    consumers = ["c0", "c1", "c2"]
    assert victims(consumers, 1, 0) == ["c0"]
    assert victims(consumers, 1, 1) == ["c1"]
    assert victims(consumers, 2, 2) == ["c2", "c0"]


def test_scheduled_crashes_fire_once_each_in_order():
    assert due_crashes(SHARE, 4.9, 0) == []
    assert due_crashes(SHARE, 5.0, 0) == [0]
    assert due_crashes(SHARE, 20, 1) == [1]
    assert due_crashes(SHARE, 20, 2) == []


@pytest.mark.parametrize(
    ("text", "workload", "error"),
    [
        ("0", SHARE, "crashConsumers=0: a number of consumers to crash, 1 or more"),
        ("two", SHARE, "crashConsumers=two: a number of consumers to crash"),
        ("4", SHARE, "crashConsumers=4: the run has 3 share consumer(s)"),
        ("1", SHARE.model_copy(update={"consumers_paused": True}), "the consumers are paused"),
        ("1", parse_workload({"name": "w", "consumerType": "CONSUMER_GROUP"}, "t"), "only share consumers crash"),
    ],
)
def test_a_crash_the_run_cannot_do_is_one_error_line(text, workload, error):
    with pytest.raises(DimsterError, match=re.escape(error)):
        crash_count(text, workload, 3)
    assert crash_count("2", SHARE, 3) == 2


def test_a_schedule_out_of_order_is_refused():
    with pytest.raises(DimsterError, match="consumerCrashes must be in order of atSeconds"):
        parse_workload({"name": "w", "consumerCrashes": [{"atSeconds": 9}, {"atSeconds": 5}]}, "t")


GROUP = parse_workload({"name": "w", "consumerType": "CONSUMER_GROUP", "staticMembership": True}, "t")


@pytest.mark.parametrize(
    ("text", "workload", "error"),
    [
        ("0", GROUP, "restartConsumers=0: a number of consumers to restart, 1 or more"),
        ("4", GROUP, "restartConsumers=4: the run has 3 consumer(s)"),
        ("1", GROUP.model_copy(update={"consumers_paused": True}), "the consumers are paused"),
    ],
)
def test_a_restart_the_run_cannot_do_is_one_error_line(text, workload, error):
    with pytest.raises(DimsterError, match=re.escape(error)):
        restart_count(text, workload, 3)
    assert restart_count("2", GROUP, 3) == restart_count("2", SHARE, 3) == 2  # any kind of consumer restarts


def test_static_membership_is_for_consumer_groups_and_names_each_member_by_its_client_id():
    from dimster.worker.clients import consumer_properties
    from dimster.worker.protocol import ConsumerSpec

    with pytest.raises(DimsterError, match="staticMembership needs consumerType: CONSUMER_GROUP"):
        parse_workload({"name": "w", "staticMembership": True}, "t")
    spec = ConsumerSpec(7, "t", "g", "CONSUMER_GROUP")
    assert consumer_properties(GROUP, "b:1", "c7", spec, {})["group.instance.id"] == "c7"
    dynamic = GROUP.model_copy(update={"static_membership": False})
    assert "group.instance.id" not in consumer_properties(dynamic, "b:1", "c7", spec, {})
