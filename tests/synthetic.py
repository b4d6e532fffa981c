"""A made-up run's metrics written by dimster's own writer (no Kafka), and exact percentiles to hold
the summary's against."""

import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np

from dimster.metrics.histogram import Histogram
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report

START = 1_800_000_000.0


def exact_percentile(values: np.ndarray, num: int, den: int) -> float:
    """Inverted-CDF percentile with the rank computed exactly: the value at ceil(n * num / den)."""
    ordered = np.sort(values)
    rank = max(1, math.ceil(Fraction(len(values) * num, den)))
    return float(ordered[rank - 1])


def synthetic_run(folder, seconds=20, consumers=3, per_second=4000, seed=7) -> dict[str, np.ndarray]:
    """Metrics of a made-up run written by dimster's own writer: e2e latencies (us) per consumer and
    partition, lognormal with a slow tail; returns every sample by (consumer, partition)."""
    rng = np.random.default_rng(seed)
    writer = MetricsWriter(folder / "metrics", START)
    samples: dict[str, list] = {}
    for second in range(seconds):
        clients, latencies = [], []
        for c in range(consumers):
            values = rng.lognormal(mean=8.5, sigma=0.8, size=per_second)
            values[: per_second // 100] *= 20  # a 1% tail
            histogram = Histogram()
            histogram.record_many(values)
            samples.setdefault(f"c{c}", []).append(values)
            latencies.append({("e2e", c): histogram.to_wire()})
            clients.append(
                ClientInterval(
                    client_id=f"c{c}",
                    role="share_consumer",
                    topic="t",
                    group="g",
                    received=per_second,
                    received_bytes=per_second * 100,
                    accepted=per_second,
                    polls=40,
                    max_poll_records=120,
                    delivery_counts={1: per_second - 5, 2: 5},
                )
            )
        producer = ClientInterval(
            client_id="p0",
            role="producer",
            topic="t",
            target_rate=consumers * per_second,
            sent=consumers * per_second,
            sent_bytes=consumers * per_second * 100,
            acked=consumers * per_second,
            next_sequence=(second + 1) * consumers * per_second,
        )
        histograms = HistogramColumns.gather([{}, *latencies])
        writer.add(worker_report(0, START + second + 1, [producer, *clients], histograms=histograms), "measure")
        if second % 7 == 6:
            writer.flush()
    writer.flush()
    (folder / "run.json").write_text(
        json.dumps(
            {
                "run_id": "synthetic",
                "status": "completed",
                "load_started": START,
                "totals": {"lost": 0, "duplicates": 0},
            }
        )
    )
    return {client: np.concatenate(parts) for client, parts in samples.items()}


def unsummarized_copy(run: Path, copy: Path) -> Path:
    """`run`'s folder copied to `copy` as it was before its summary (no summary/)."""
    shutil.copytree(run, copy, ignore=lambda folder, names: ["summary"] if Path(folder) == run else [])
    return copy
