"""scripts/bench/pacing.py's figures, read from a bundle whose producers' counts and lateness are known:
each second's rate error against the target over the time its report covered, the whole phase's, the
publish delay's percentiles, and across a live rate change the report that spans it left out; and
`--pin`'s placement of every thread of a process."""

import os
import subprocess
import sys

import pytest

from dimster.metrics.histogram import Histogram
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report
from tests.bench import bench_script
from tests.waiting import until

pytestmark = pytest.mark.unit

pacing = bench_script("pacing")
START = 1_700_000_000.0


def bundle(tmp_path, seconds: list[tuple[int, float, float]], late_ms: float = 2.0):
    """A report a second (its end at START + second): (records sent, target rate, its span); the
    producer's records handed over `late_ms` late, one in a hundred 40 ms late."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    end = START
    for second, (sent, target, span) in enumerate(seconds):
        end += span
        late = Histogram()
        late.record_many([late_ms * 1000] * 99 + [40_000.0])
        delays = HistogramColumns.gather([{("publish_delay", -1): late.to_wire()}])
        producer = ClientInterval(client_id="p0", role="producer", topic="t", sent=sent, target_rate=target)
        cpu = 0.25 * span if second else 0.9  # a quarter of a core while measured; the warm-up's is not judged
        writer.add(worker_report(0, end, [producer], cpu, histograms=delays), "measure" if second else "warmup")
    writer.flush()
    return tmp_path


def test_each_seconds_error_is_against_the_target_over_the_time_its_report_covered(tmp_path):
    # a warm-up report, then four measured: 1,000 of 1,000; 990 of 1,000; 1,500 of 1,000 over 1.5 s; 1,020 of 1,000
    folder = bundle(tmp_path, [(5, 1000.0, 1.0), (5, 1000.0, 1.0), (990, 1000.0, 1.0), (1500, 1000.0, 1.5),
                               (1020, 1000.0, 1.0)])  # fmt: skip
    figures = pacing.judged(folder, None)
    # the first measured report's span runs from the warm-up's last report: all four are judged
    assert figures["seconds_judged"] == 4
    assert figures["rate_error_worst_second"] == pytest.approx(0.995)  # 5 of 1,000 in the first measured second
    figures = pacing.judged(bundle(tmp_path / "b", [(1000, 1000.0, 1.0), (1000, 1000.0, 1.0), (990, 1000.0, 1.0),
                                                    (1500, 1000.0, 1.5), (1020, 1000.0, 1.0)]), None)  # fmt: skip
    assert figures["rate_error_worst_second"] == pytest.approx(0.02)  # 1,020 of 1,000; 1,500 over 1.5 s is exact
    assert figures["rate_error_run"] == pytest.approx(abs(4510 - 4500) / 4500, abs=1e-6)
    assert figures["sent"] == 4510
    assert figures["worker_cores"] == pytest.approx(0.25)  # 1.125 CPU-s over the 4.5 s judged
    assert figures["publish_delay_ms"]["p50"] == pytest.approx(2.0, rel=0.01)
    assert figures["publish_delay_ms"]["p99"] == pytest.approx(2.0, rel=0.01)  # 99 of 100 at 2 ms
    assert figures["publish_delay_ms"]["max"] == pytest.approx(40.0, rel=0.01)


def test_across_a_live_change_the_report_that_spans_it_is_left_out(tmp_path):
    """The rate halves at START + 2.5: the report ending at 3.0 holds both rates and no one target."""
    folder = bundle(tmp_path, [(1000, 1000.0, 1.0), (1000, 1000.0, 1.0), (1000, 1000.0, 1.0), (750, 500.0, 1.0),
                               (500, 500.0, 1.0)])  # fmt: skip
    assert pacing.judged(folder, None)["rate_error_worst_second"] == pytest.approx(0.5)
    figures = pacing.judged(folder, START + 3.5)
    assert figures["seconds_judged"] == 3 and figures["rate_error_worst_second"] == pytest.approx(0.0)


def test_pinning_a_process_places_every_one_of_its_threads_and_can_be_taken_back():
    """--pin puts a broker's threads, all of them, on one core, and gives them every core back after."""
    code = "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(60,)).start()\n"
    child = subprocess.Popen([sys.executable, "-c", code + "time.sleep(60)"])
    try:
        tasks = f"/proc/{child.pid}/task"
        assert until(lambda: len(os.listdir(tasks)) == 4, timeout=60)
        every_cpu = set(range(os.cpu_count() or 1))
        pacing.pin_threads(child.pid, {max(every_cpu)})
        assert [os.sched_getaffinity(int(t)) for t in os.listdir(tasks)] == [{max(every_cpu)}] * 4
        pacing.pin_threads(child.pid, every_cpu)
        assert [os.sched_getaffinity(int(t)) for t in os.listdir(tasks)] == [every_cpu] * 4
    finally:
        child.kill()
        child.wait()
