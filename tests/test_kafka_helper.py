"""dimster's Java helper as a service (kafka/helper.py): one JVM per Kafka version and state folder,
answering each task on a connection of its own. Kafka's own jars, no broker: configdefs and
validate need none."""

import json
import signal
import subprocess
import sys

import pytest

from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.helper import KafkaHelper, end_idle_helper, run_helper
from dimster.processes import TrackedProcess

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


def test_classes_of_other_sources_are_compiled_beside_never_over_those_a_running_helper_uses(helper):
    """Two dimster versions on one host (a user's and a checkout's): each has its classes' folder, so
    neither replaces the classes under the other's running JVM; the entity-configs task (new with
    these sources) works on the helper started from them."""
    import dataclasses

    from dimster.errors import DimsterError
    from dimster.kafka.distribution import _compile_helper, helper_key

    ours = helper.distribution
    assert ours.helper_key == helper_key() and ours.helper == ours.home / "helper" / ours.helper_key
    assert run_helper(ours, "configdefs").returncode == 0
    running, stamp = helper.process(), (ours.helper / "sources.java").read_text()
    drivers = {"DimsterProducer", "DimsterClientSupport"}  # other sources: a part of ours
    others = dataclasses.replace(ours, helper_key=helper_key(drivers))
    try:
        _compile_helper(others, drivers)
        assert (others.helper / "DimsterProducer.class").exists() and others.helper != ours.helper
        assert not (others.helper / "DimsterKafkaTool.class").exists()  # compiled from the other sources only
        assert (ours.helper / "sources.java").read_text() == stamp and (ours.helper / "DimsterKafkaTool.class").exists()
        with pytest.raises(DimsterError, match="sources changed while this command started"):
            _compile_helper(dataclasses.replace(ours, helper_key="0" * 16))  # a key that is not these sources'
        assert not (ours.home / "helper" / ("0" * 16)).exists()
        answer = run_helper(ours, "entity-configs", json.dumps({"group": {"share.record.lock.duration.ms": "x"}}))
        assert helper.process() == running  # the same JVM, its classes where they were
        verdict = json.loads(answer.stdout.splitlines()[-1])
        assert (
            "share.record.lock.duration.ms" in verdict["group"]["names"] and "retention.ms" in verdict["topic"]["names"]
        )
        assert (
            verdict["group"]["problem"]
            == "Invalid value x for configuration share.record.lock.duration.ms: Not a number of type INT"
        )
    finally:
        import shutil

        shutil.rmtree(others.helper, ignore_errors=True)


DYING = """
import socket, sys, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen()
print("listening", flush=True)
server.accept()[0].close()
time.sleep(1)  # what a SIGKILLed JVM does while its threads end: its socket takes connections, unanswered
"""


def test_a_helper_that_drops_a_task_while_it_ends_is_waited_out_and_the_task_runs_on_a_fresh_one(helper):
    """A process of the test's own plays a helper that is ending (a SIGKILLed JVM while its threads
    end): on the helper's socket, under the helper's record, it drops the task it took and ends a second
    later, taking connections until then. The task is asked again once it has ended, of a fresh helper,
    and the process is waited for, not killed."""
    helper.folder.mkdir(parents=True)
    dying = subprocess.Popen([sys.executable, "-c", DYING, str(helper.socket_path)], stdout=subprocess.PIPE)
    try:
        assert dying.stdout is not None and dying.stdout.readline() == b"listening\n"
        played = TrackedProcess.of(dying.pid)
        record = {"pid": played.pid, "started": played.started, "classes": helper.classes}
        (helper.folder / "helper.json").write_text(json.dumps(record))
        assert helper.process() == played  # dimster takes it for its helper
        answer = run_helper(helper.distribution, "configdefs")
        assert answer.returncode == 0 and "log.retention.ms" in answer.stdout, answer
        assert dying.wait(5) == 0  # it ended by itself
        assert helper.process() not in (None, played)
    finally:
        if dying.poll() is None:
            dying.kill()
        dying.wait()
