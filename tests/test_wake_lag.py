"""The worker's wake probe: its wake-ups come late while another thread of the process keeps the GIL."""

import sys
import threading
import time

import pytest

from dimster.worker.wake_lag import PERIOD_S, WakeProbe
from tests.waiting import until

pytestmark = pytest.mark.unit


def test_a_thread_that_keeps_the_gil_makes_the_probes_wake_ups_late():
    """With a 50 ms switch interval a thread spinning in Python keeps the GIL 50 ms at a time, and the
    probe, asking to wake every 10 ms, waits for it: the lateness comes from the interval, not the
    machine's speed. (A thread of the niced unit tier may wait seconds for a CPU: the spinner spins for
    a second of its own CPU time, in which the probe can only sleep or wait for it.)"""
    probe = WakeProbe()
    began = time.monotonic()
    probe.start()
    time.sleep(0.3)
    quiet_wakes = 0

    def woke() -> bool:
        nonlocal quiet_wakes
        quiet_wakes += probe.take().wakes
        return quiet_wakes >= 1

    assert until(woke)
    quiet_seconds = time.monotonic() - began

    def spin() -> None:
        spin_until = time.thread_time() + 1.0  # a second of its own: it holds the GIL whenever it runs
        while time.thread_time() < spin_until:
            pass

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    try:
        spinner = threading.Thread(target=spin)
        spinner.start()
        spinner.join()
    finally:
        sys.setswitchinterval(switch_interval)
    probe.stop()
    probe._thread.join(120)  # its last wake-up, however late, is counted before the take
    assert not probe._thread.is_alive()
    busy = probe.take()
    assert quiet_wakes <= quiet_seconds / PERIOD_S + 1  # never more often than its period
    # each wake-up waits out the spinner's 50 ms: the probe waited most of the second to run
    assert busy.wakes >= 5 and busy.lag_ms_max >= 40 and busy.lag_ms_sum >= 500
    assert probe.take().wakes == 0  # taking starts a new count
