"""A coordinator killed with SIGKILL mid-run, on the real local cluster (issue 34, item 1): its workers
stop on their own, `dimster status` says the run crashed, and the run's end is recorded from its
journal with an account that closes."""

import os
import signal
import time

import psutil
import pytest

from dimster.coordinator.account.journal import JOURNAL
from dimster.coordinator.loop.recover import recover_crashed
from tests.cli import dimster
from tests.runs import run_info, start_run, wait

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("consumer_type", ["SHARE_GROUP", "CONSUMER_GROUP"])
def test_a_killed_coordinator_leaves_no_worker_and_its_account_closes_from_the_journal(
    tmp_path, local_cluster, consumer_type
):
    """A consumer group commits every 5 s, so records its consumers received past its last commit are
    both in its reports and past its position: counted once, as received."""
    process, bundle = start_run(
        tmp_path, "killed", consumerType=consumer_type, durationSeconds=300, reportIntervalSeconds=1, warmupSeconds=0
    )
    try:
        wait("elapsedSeconds>=10")  # the kill comes at 10 s of load, between reports
        time.sleep(0.5)
        workers = psutil.Process(process.pid).children(recursive=True)
        assert workers, "the run has worker processes"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    gone_by = time.monotonic() + 10
    while any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):
        assert time.monotonic() < gone_by, [w.pid for w in workers if w.is_running()]
        time.sleep(0.2)
    told = dimster("status", "local")
    assert told.code == 5 and "the run of 'local' crashed" in told.stderr, told.stderr
    assert run_info(bundle)["status"] == "crashed" and (bundle / JOURNAL).is_file()

    notes = recover_crashed(bundle)  # what `dimster summarize RUN_DIR` does first
    assert notes and notes[0].startswith("the run crashed"), notes
    info = run_info(bundle)
    totals, [account] = info["totals"], info["account"].values()
    assert info["status"] == "crashed" and info["recovered_from"] == "journal"
    assert totals["acked"] >= totals["acked_reported"] > 0 and totals["received"] > 0
    assert account["closes"] and account["lost"] == 0, account
    assert not (bundle / JOURNAL).exists()
