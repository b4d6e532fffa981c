"""dimster's Java helper as a service (kafka/helper.py): one JVM per Kafka version and state folder,
answering each task on a connection of its own. Kafka's own jars, no broker: configdefs and
validate need none."""

import json
import signal

import pytest

from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.helper import KafkaHelper, end_idle_helper, run_helper

pytestmark = pytest.mark.kafka


@pytest.fixture
def helper(tmp_path, monkeypatch) -> KafkaHelper:
    """A helper in a state folder of the test's own, ended at the end."""
    monkeypatch.setenv("DIMSTER_STATE_DIR", str(tmp_path / "state"))
    helper = KafkaHelper(kafka_distribution(DEFAULT_KAFKA_VERSION, fetch=False))
    yield helper
    if (process := helper.process(current=False)) is not None:
        process.stop(10)


def test_tasks_at_once_share_one_jvm_and_each_gets_its_own_answer(helper, tmp_path):
    watch = helper.task("watch-lag", "127.0.0.1:1", "60000", "{}")  # stays open: a run's lag watch
    first = helper.process()
    assert first is not None
    bad = tmp_path / "bad.properties"
    bad.write_text("process.roles=broker\nnode.id=x\n")
    answers = [run_helper(helper.distribution, "validate", str(bad)) for _ in range(3)]
    assert [a.returncode for a in answers] == [1, 1, 1]
    assert all("Invalid value x" in a.stdout for a in answers), answers[0]
    definitions = json.loads(run_helper(helper.distribution, "configdefs").stdout)
    assert definitions["share.coordinator.state.topic.num.partitions"]["updateMode"] == "read-only"
    assert helper.process() == first  # one JVM answered all of them
    end_idle_helper(DEFAULT_KAFKA_VERSION)  # `cluster down` while a watch is open: it goes on
    assert first.alive()
    watch.close()
    end_idle_helper(DEFAULT_KAFKA_VERSION)  # nothing open: it ends
    assert helper.process(current=False) is None or not first.alive()


def test_a_helper_killed_behind_dimsters_back_is_started_again_at_the_next_task(helper):
    assert run_helper(helper.distribution, "configdefs").returncode == 0
    killed = helper.process()
    assert killed is not None
    killed.send(signal.SIGKILL)
    answer = run_helper(helper.distribution, "configdefs")
    assert answer.returncode == 0 and "log.retention.ms" in answer.stdout
    again = helper.process()
    assert again is not None and again != killed


def test_a_helper_of_other_classes_is_replaced(helper):
    assert run_helper(helper.distribution, "configdefs").returncode == 0
    old = helper.process()
    record = helper.folder / "helper.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "classes": "older"}))
    assert helper.process() is None  # not today's classes: not used
    assert run_helper(helper.distribution, "configdefs").returncode == 0
    assert old is not None and not old.alive() and helper.process() not in (None, old)
