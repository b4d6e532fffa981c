"""omb-result.json (results/omb_result.py) on runs written by dimster's own metrics writer, no Kafka
and no Spark: exactly OMB's TestResult fields in OMB's units, a series entry per 10 s window of the
measured phase, the aggregated figures from the measured records' buckets, HdrHistogram's percentile
levels, what OMB's create_charts.py does to a file passing, and the published schema taking it."""

import json
import math
from itertools import chain, pairwise

import numpy as np
import pytest
import yaml
from jsonschema import Draft7Validator

from dimster.errors import DimsterError
from dimster.metrics.histogram import ALPHA, Histogram
from dimster.results.metrics_writer import MetricsWriter
from dimster.results.omb_records import OmbTestResult
from dimster.results.omb_result import omb_result, quantile_map, write_omb_result
from dimster.schemas import SCHEMAS_DIR
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report
from tests.synthetic import START, exact_percentile, synthetic_run

pytestmark = pytest.mark.unit

SHAPE = {"messageSize": 100, "topics": 1, "partitionsPerTopic": 3, "producersPerTopic": 1, "consumersPerGroup": 3}
STATS = {"50pct": 50, "75pct": 75, "95pct": 95, "99pct": 99, "999pct": 99.9, "9999pct": 99.99}
MAPS = ("aggregatedPublishLatencyQuantiles", "aggregatedPublishDelayLatencyQuantiles",
        "aggregatedEndToEndLatencyQuantiles")  # fmt: skip


def written(run_dir, workload="max-rate-1-topic", driver="Kafka-exactly-once") -> dict:
    path = write_omb_result(run_dir, workload, driver)
    assert path == run_dir / "omb-result.json"
    result = json.loads(path.read_text())
    schema = json.loads((SCHEMAS_DIR / "omb-result.schema.json").read_text())
    assert not list(Draft7Validator(schema).iter_errors(result))
    charted(result)
    return result


def charted(result: dict) -> None:
    """create_charts.py's reads: max() over every list, float(key) and log10 of each map's levels, and
    nothing null, NaN or infinite anywhere."""
    lists = [v for v in result.values() if isinstance(v, list)]
    assert all(lists) and max(chain(*lists)) >= 0
    for name in MAPS:
        for level, value in sorted((float(k), v) for k, v in result[name].items()):
            if level <= 99.999:
                math.log10(100 / (100 - level))
            assert isinstance(value, (int, float))
    for value in chain(*lists, *(m.values() for m in (result[n] for n in MAPS))):
        assert value is not None and math.isfinite(value)
    for name, value in result.items():
        assert value is not None and not (isinstance(value, float) and not math.isfinite(value)), name


def test_a_synthetic_run_gives_every_field_of_testresult_and_the_measured_percentiles(tmp_path):
    samples = synthetic_run(tmp_path, seconds=20)
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"name": "synthetic", **SHAPE}))
    result = written(tmp_path)

    assert list(result) == list(OmbTestResult.__annotations__) and len(result) == 62  # TestResult.java's
    assert (result["workload"], result["driver"]) == ("max-rate-1-topic", "Kafka-exactly-once")
    shape = [result[k] for k in ("messageSize", "topics", "partitions", "producersPerTopic", "consumersPerTopic")]
    assert shape == [100, 1, 3, 1, 3]
    lists = {k: v for k, v in result.items() if isinstance(v, list)}
    assert len(lists) == 4 + 3 * 8 and {len(v) for v in lists.values()} == {2}  # 20 measured s: 2 windows
    assert result["publishRate"] == result["consumeRate"] == [12000.0, 12000.0]
    assert result["publishErrorRate"] == [0.0, 0.0] and result["backlog"] == [0, 0]
    # no publish histograms in this run: OMB's empty HdrHistogram figures
    assert all(result[f"publishLatency{s}"] == [0.0, 0.0] for s in ("Avg", *STATS, "Max"))
    assert all(result[f"publishDelayLatency{s}"] == [0, 0] for s in (*STATS, "Max"))
    assert result["aggregatedPublishLatencyQuantiles"] == result["aggregatedPublishDelayLatencyQuantiles"] == {}

    everything = np.concatenate(list(samples.values()))
    merged = Histogram()
    merged.record_many(everything)
    for name, q in STATS.items():
        assert result[f"aggregatedEndToEndLatency{name}"] == merged.percentile(q) / 1000  # summary.json's figure
        num, den = (int(q * 100), 10000)
        exact = exact_percentile(everything, num, den) / 1000
        assert result[f"aggregatedEndToEndLatency{name}"] == pytest.approx(exact, rel=ALPHA), name
    assert result["aggregatedEndToEndLatencyMax"] == everything.max() / 1000
    assert result["aggregatedEndToEndLatencyAvg"] == pytest.approx(everything.mean() / 1000, rel=ALPHA)
    # the windows' figures: each window's own records
    for k, window in enumerate((slice(0, 10), slice(10, 20))):
        values = np.concatenate([np.concatenate(np.split(v, 20)[window]) for v in samples.values()])
        assert result["endToEndLatency99pct"][k] == pytest.approx(exact_percentile(values, 99, 100) / 1000, rel=ALPHA)
        assert result["endToEndLatencyMax"][k] == values.max() / 1000

    levels = [float(k) for k in result["aggregatedEndToEndLatencyQuantiles"]]
    values = list(result["aggregatedEndToEndLatencyQuantiles"].values())
    assert levels[:3] == [0.0, 0.5, 1.0] and levels[-1] == 100.0 and levels == sorted(set(levels))
    assert values == sorted(values) and values[0] == everything.min() / 1000


def producer(name: str, acked: int, errors: int, publish, delay, warmup: bool) -> tuple[ClientInterval, dict]:
    """A producer's report: its records' publish latencies and delays (under warmup_ when intended in warm-up)."""
    prefix = "warmup_" if warmup else ""
    wires = {}
    for metric, values in (("publish", publish), ("publish_delay", delay)):
        h = Histogram()
        h.record_many(values)
        wires[(prefix + metric, 0)] = h.to_wire()
    return ClientInterval(client_id=name, role="producer", topic="t", acked=acked, sent=acked,
                          send_errors=errors), wires  # fmt: skip


def test_windows_of_the_measured_phase_count_its_records_and_aggregates_leave_warmup_out(tmp_path):
    """5 s of warm-up, 25 measured s (windows of 10, 10 and 5 s), consumers settling 100 fewer records
    a second than acknowledged: rates are each window's counts over its length, the backlog counts from
    load start, the aggregated figures are the measured records'."""
    rng = np.random.default_rng(3)
    writer = MetricsWriter(tmp_path / "metrics", START)
    measured_publish, measured_delay, windows_publish = [], [], [[], [], []]
    for second in range(30):
        phase = "warmup" if second < 5 else "measure"
        acked = 1000 + 10 * second
        publish, delay = rng.lognormal(7, 0.5, 200), rng.lognormal(5, 1, 200)
        clients = [producer("p0", acked, second % 2, publish, delay, warmup=phase == "warmup")]
        if second == 5:  # a late warm-up record acknowledged in the measured phase: a window's, not the phase's
            clients.append(producer("p1", 0, 0, np.array([5e6]), np.array([9e6]), warmup=True))
            windows_publish[0].append(5e6)
        consumer = ClientInterval(client_id="c0", role="share_consumer", topic="t", group="g", received=acked - 80,
                                  accepted=acked - 100, rejected=0)  # fmt: skip
        latencies = HistogramColumns.gather([wires for _, wires in clients])
        report = worker_report(0, START + second + 0.5, [c for c, _ in clients] + [consumer], histograms=latencies)
        writer.add(report, phase)
        if phase == "measure":
            measured_publish.append(publish)
            measured_delay.append(delay)
            windows_publish[(second - 5) // 10].extend(publish)
        if second % 4 == 3:
            writer.flush()
    writer.flush()
    final = {"name": "w", **SHAPE, "topics": 2, "consumersPerGroup": 4}
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "final_workload": final}))
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"name": "w", **SHAPE}))  # the final one wins
    result = written(tmp_path)

    assert (result["topics"], result["consumersPerTopic"]) == (2, 4)
    acked = [[1000 + 10 * s for s in range(first, min(first + 10, 30))] for first in (5, 15, 25)]
    assert result["publishRate"] == [sum(a) / len(a) for a in acked] == [1095.0, 1195.0, 1270.0]
    assert result["consumeRate"] == [r - 80 for r in result["publishRate"]]
    assert result["publishErrorRate"] == [0.5, 0.5, 0.6]  # an error every other second: 5, 5 and 3
    assert result["backlog"] == [1500, 2500, 3000]  # 100 a second from load start (second 0) to the window's end

    publish, delay = Histogram(), Histogram()
    publish.record_many(np.concatenate(measured_publish))
    delay.record_many(np.concatenate(measured_delay))
    for name, q in STATS.items():
        assert result[f"aggregatedPublishLatency{name}"] == publish.percentile(q) / 1000
        assert result[f"aggregatedPublishDelayLatency{name}"] == round(delay.percentile(q))
    assert result["aggregatedPublishLatencyMax"] == publish.max / 1000 < 5000  # the warm-up record left out
    assert isinstance(result["aggregatedPublishDelayLatencyMax"], int)
    assert all(isinstance(v, int) for v in result["aggregatedPublishDelayLatencyQuantiles"].values())
    assert result["publishLatencyMax"][0] == 5000.0  # ... but observed in the first window
    for k, values in enumerate(windows_publish):
        window = Histogram()
        window.record_many(values)
        assert result["publishLatency99pct"][k] == window.percentile(99) / 1000
        assert result["publishLatencyAvg"][k] == pytest.approx(np.mean(values) / 1000, rel=ALPHA)
    assert result["endToEndLatencyAvg"] == [0.0, 0.0, 0.0] and result["aggregatedEndToEndLatencyQuantiles"] == {}
    assert len(result["aggregatedPublishLatencyQuantiles"]) > 100


def test_quantile_map_walks_hdrhistograms_levels():
    h = Histogram()
    h.record_many(np.arange(1, 1001) * 100.0)
    levels = quantile_map(h, 1 / 1000, whole=False)
    keys = list(levels)
    assert keys[:4] == [0.0, 0.5, 1.0, 1.5] and 50.25 in keys and 87.625 in keys and keys[-1] == 100.0
    steps = [b - a for a, b in pairwise(keys)]
    assert steps[:99] == [0.5] * 99 and all(s > 0 for s in steps)  # 0.5 up to 50, then smaller
    assert list(levels.values()) == sorted(levels.values())
    assert levels[0.0] == pytest.approx(0.1, rel=ALPHA) and levels[100.0] == pytest.approx(100.0, rel=ALPHA)
    one = Histogram()
    one.record(2500.0)
    assert quantile_map(one, 1.0, whole=True) == {0.0: 2500, 100.0: 2500}
    assert quantile_map(Histogram(), 1.0, whole=True) == {}


def test_a_run_without_a_measured_interval_or_its_workload_shape_is_one_clear_error(tmp_path):
    writer = MetricsWriter(tmp_path / "metrics", START)
    writer.add(worker_report(0, START + 1, [ClientInterval(client_id="p0", role="producer", topic="t")]), "warmup")
    writer.flush()
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"name": "w", **SHAPE}))
    with pytest.raises(DimsterError, match="no measured interval"):
        omb_result(tmp_path, "w", "Kafka")
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"name": "w", **SHAPE, "partitionsPerTopic": "3"}))
    with pytest.raises(DimsterError, match=r"workload\.yaml: partitionsPerTopic is '3', omb-result\.json needs"):
        omb_result(tmp_path, "w", "Kafka")
    assert not (tmp_path / "omb-result.json").exists()
