"""The worker's wake probe: its wake-ups come late while another thread of the process keeps the GIL."""

import sys
import threading
import time

import pytest

from dimster.worker.wake_lag import PERIOD_S, WakeProbe

pytestmark = pytest.mark.unit


def test_a_thread_that_keeps_the_gil_makes_the_probes_wake_ups_late():
    """With a 50 ms switch interval a thread spinning in Python keeps the GIL 50 ms at a time, and the
    probe, asking to wake every 10 ms, waits for it: the lateness comes from the interval, not the
    machine's speed."""
    probe = WakeProbe()
    probe.start()
    time.sleep(0.3)
    quiet = probe.take()
    spin_until = time.monotonic() + 1.0

    def spin() -> None:
        while time.monotonic() < spin_until:
            pass

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    try:
        spinner = threading.Thread(target=spin)
        spinner.start()
        spinner.join()
    finally:
        sys.setswitchinterval(switch_interval)
    busy = probe.take()
    probe.stop()
    assert 1 <= quiet.wakes <= 0.3 / PERIOD_S + 1  # never more often than its period
    # each wake-up waits out the spinner's 50 ms: the probe waited most of the second to run
    assert busy.wakes >= 5 and busy.lag_ms_max >= 40 and busy.lag_ms_sum >= 500
    assert probe.take().wakes <= 1  # taking starts a new count
