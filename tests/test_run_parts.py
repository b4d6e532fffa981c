"""The coordinator's parts on their own: the status names every field of status_schema once, and the
live-changes part never lets a fault step and a broker redeploy change nodes at the same time."""

import itertools
import json
import threading
import time
from types import SimpleNamespace

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.control.status_schema import NAMES
from dimster.coordinator.live.apply import LiveChanges
from dimster.coordinator.live.faults import FaultRunner, FaultStep
from dimster.coordinator.loop.status import RunFacts, numeric_status
from dimster.results.bundle import ResultsBundle
from tests.waiting import until

pytestmark = pytest.mark.unit


def test_the_status_gives_every_schema_field_in_its_order_and_nothing_else():
    facts = RunFacts(0.0, 2, 4, {"e2eP99Ms": 12.5}, None, None, None)
    status = numeric_status(RunAggregate({"g": "t"}), facts)
    assert tuple(status) == NAMES
    assert (status["producers"], status["consumers"], status["e2eP99Ms"]) == (2, 4, 12.5)
    assert status["lost"] is None and status["unconsumed"] is None  # known only at the end
    ended = numeric_status(RunAggregate({"g": "t"}), RunFacts(0.0, 2, 4, {}, 7, None, {"g": 0}))
    assert (ended["lost"], ended["unconsumed"], ended["brokerLag"]) == (0, 0, 7)


class NodeCluster:
    """A cluster whose node changes take a while and note when each began and ended."""

    def __init__(self):
        self.spans: list[tuple[str, float, float]] = []
        self.profile = SimpleNamespace(start_timeout_seconds=5)
        self.changing = threading.Event()  # set as the first change begins

    def _change(self, what: str) -> None:
        began = time.monotonic()
        self.changing.set()
        time.sleep(0.3)
        self.spans.append((what, began, time.monotonic()))

    def fault(self, node, action, progress):
        self._change(f"{action} {node}")
        return f"{action} node {node}"

    def redeploy(self, progress):
        self._change("redeploy")
        return SimpleNamespace(dynamic=[], restarted_nodes=[1])


def test_a_fault_step_and_a_redeploy_never_change_nodes_at_the_same_time(tmp_path):
    cluster = NodeCluster()
    bundle = ResultsBundle(tmp_path, "w")
    log = RunLog(bundle, say=lambda _line: None)
    live = LiveChanges(cluster, None, None, log, {})  # type: ignore[arg-type]  # only faults and redeploys here
    steps = [FaultStep(0.05, "restart", 1), FaultStep(0.1, "restart", 2)]
    live.fault_runner = FaultRunner(cluster, steps, time.time(), log.background, live.node_changes)
    live.fault_runner.start()
    redeploy = threading.Thread(target=live._redeploy, args=(cluster,))
    # the first fault step is under way, the second is due (a thread of the niced unit tier may wait
    # seconds for a CPU: waited for, never slept for)
    assert cluster.changing.wait(120)
    redeploy.start()
    assert until(lambda: len(cluster.spans) == 3)  # all three, before the schedule ends
    redeploy.join(120)
    live.stop_faults()
    live.fault_runner.thread.join(120)
    spans = sorted(cluster.spans, key=lambda span: span[1])
    assert sorted(what for what, *_ in spans) == ["redeploy", "restart 1", "restart 2"]
    assert spans[0][0] == "restart 1"
    for (_, _, ended), (_, began, _) in itertools.pairwise(spans):
        assert began >= ended  # one after the other
    log.write_background()
    lines = (bundle.path / "events.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["event"] for line in lines]
    assert kinds.count("fault") == 2 and "broker_redeploy_done" in kinds
