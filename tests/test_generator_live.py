"""A saturated load generator, for real, on the session's `local` broker: half-way through a share-group
run, the run's worker is moved into a CPU cgroup of its own limited to 2 % of a core (CFS bandwidth, as
a container's CPU limit is enforced), then back. The run must say so while the limit holds, name the worker
and its threads' wait, record the measured phase as saturated, and its account must still close.

Why the margin holds on a busy host: at 2,000 msg/s the worker used 15-16 % of a core here (measured
with psutil while the test was written), so under a limit of 2 % the kernel holds all its threads for
most of each 100 ms period: its wake probe waits most of each window, where the rule asks 10 %. Other
work on the host only makes it wait longer. The limit is the kernel's, not the host's load: it does
not depend on how busy the other core is. A host busy enough may have the generator saturated before
the limit begins (seen once: beside other tests its threads waited 12-27 % before it, and the limit
made no new event); so the test asks the generator's state within a window of the limit (its last
event, saturated or keeps up), not for an event after it, and the measured phase's record for the
limit's effect. How soon: the worker's next report must show the wait, and a window is judged at its
console line, so a second or two here (1.8-1.9 s quiet, 0.7-2.0 s beside a CPU hog); but that report is
built and sent by a worker whose threads share 2 ms of CPU every 100 ms, and the busier the host the
later it comes: 3.06 s at a load average of 15, 4.0 s on CI beside the whole suite. The test asks
for it while the limit holds (twice the latest seen). The windows without a report wait for the report
that covers them (the watch's record), so the phase's saturated time is the limit's, less the window
or two at its edges, however late the report (8.0-9.1 s of a limit of 8 s, beside a CPU hog)."""

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dimster.coordinator.control.run_state import console_log
from tests.runs import evidence, run_info, start_detached, stop, wait

pytestmark = pytest.mark.kafka

RATE = 2000  # msg/s: about 15 % of a core for the worker
LIMIT = 0.02  # of a core, while limited
LIMITED_SECONDS = 8
INTERVAL = 1
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")  # cgroup v1's CPU controller, as on this project's machines
PERIOD_US = 100_000


@contextlib.contextmanager
def cpu_limited(pids: list[int], cores: float) -> Iterator[None]:
    """`pids` in a CPU cgroup of their own, limited to `cores`; moved back to the root group and the
    group removed at the end, also on failure."""
    assert (CPU_CGROUP / "cpu.cfs_quota_us").exists(), f"no cgroup v1 CPU controller at {CPU_CGROUP}"
    group = CPU_CGROUP / f"dimster-test-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(int(cores * PERIOD_US)))
        for pid in pids:
            (group / "cgroup.procs").write_text(str(pid))  # all its threads
        yield
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # ended meanwhile
                (CPU_CGROUP / "cgroup.procs").write_text(pid)
        group.rmdir()


def test_a_worker_held_to_2_percent_of_a_core_is_named_while_held_and_its_phase_saturated(local_cluster, tmp_path):
    bundle = start_detached(
        tmp_path, "limited", partitionsPerTopic=2, producersPerTopic=2, producerRate=RATE, consumersPerGroup=2,
        messageSize=128, warmupSeconds=2, reportIntervalSeconds=INTERVAL, drainTimeoutSeconds=30,
    )  # fmt: skip
    try:
        wait("elapsedSeconds>=5 and consRate>0", timeout=60)  # in the measured phase (a warm-up of 2 s)
        pids = [w["pid"] for w in run_info(bundle)["workers"]]
        limited_at = time.time()
        with cpu_limited(pids, LIMIT):
            time.sleep(LIMITED_SECONDS)
        wait(f"elapsedSeconds>={5 + LIMITED_SECONDS + 2 * INTERVAL}", timeout=60)
    finally:
        stop()
    info = run_info(bundle)
    said = evidence(bundle)
    assert info["status"] == "completed", said
    totals = info["totals"]
    assert totals["lost"] == 0 and totals["sent"] == totals["acked"] == totals["received"] > 0, said
    # the flag: in the measured phase, the worker named with its threads' wait
    measure = info["generator"]["measure"]
    assert measure["saturated"] and set(measure["workers"]) == {str(i) for i in range(len(pids))}, measure
    worst = measure["workers"]["0"]
    assert worst["wait_share"] >= 0.5 and any("waited" in r for r in worst["reasons"]), worst
    assert LIMITED_SECONDS - 2 * INTERVAL <= measure["saturated_seconds"] <= measure["seconds"], measure
    # while the limit holds the generator is saturated: its state is its last event's
    # (saturated, keeps up), which a host busy enough may have set before the limit
    marks = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    changes = [(m["time"] - limited_at, m["event"]) for m in marks if m["event"].startswith("generator_")]
    by_then = [event for at, event in changes if at <= LIMITED_SECONDS]
    assert by_then and by_then[-1] == "generator_saturated", (changes, said)
    console = console_log("local").read_text()
    assert "the load generator is saturated (worker 0: its threads waited" in console, console[-3000:]
