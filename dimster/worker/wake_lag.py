"""How late a worker's threads wake. A probe thread asks to wake every 10 ms and counts how late it
does. A client thread returning from a poll waits the same way, for a core and for the process's one
interpreter lock (the GIL), before it can read the clock and account for its records. While wake-ups
come late, the clients' latencies and rates measure the worker rather than Kafka: the summary says so
(`late_wake_notes`). The probe's lateness adds up to the time it spent waiting to run. On a virtual
machine the host's steal time says how much of that wait was another guest's."""

import threading
import time

import psutil

from dimster.worker.protocol import WakeLag

PERIOD_S = 0.01  # the probe's wake-up period


class WakeProbe:
    def __init__(self, period_s: float = PERIOD_S):
        self.period_s = period_s
        self._lock = threading.Lock()
        self._lag = WakeLag()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wake-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def take(self) -> WakeLag:
        """The wake-ups since the last call."""
        with self._lock:
            taken, self._lag = self._lag, WakeLag()
        return taken

    def _run(self) -> None:
        while not self._stopped.is_set():
            due = time.monotonic() + self.period_s
            time.sleep(self.period_s)
            lag_ms = max(0.0, time.monotonic() - due) * 1000
            with self._lock:
                self._lag.wakes += 1
                self._lag.lag_ms_sum += lag_ms
                self._lag.lag_ms_max = max(self._lag.lag_ms_max, lag_ms)


def host_steal_seconds() -> float:
    """CPU time the hypervisor gave other guests while this host's vCPUs wanted to run, summed over its
    cores, since boot (0 where the kernel does not count it)."""
    return float(getattr(psutil.cpu_times(), "steal", 0.0))
