"""Cost of the Spark summary against run size: synthetic runs equivalent to 1M, 10M and 100M messages
over the same duration, clients and partitions. Their metrics hold the same number of intervals and
about the same number of histogram buckets, so the summary's time and memory should barely move.

    .venv/bin/python scripts/bench/summary_scale.py [--seconds 600] [--messages 1e6 1e7 1e8]
"""

import argparse
import json
import math
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq

from dimster.metrics.histogram import GAMMA
from dimster.pipeline.summary import summarize
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report

START = 1_800_000_000.0
PRODUCERS, CONSUMERS, PARTITIONS = 3, 12, 6


def bucket_counts(count: int, median_us: float, sigma: float) -> dict[int, int]:
    """Expected bucket counts of `count` lognormal latencies: what a worker's histogram would hold."""
    if count <= 0:
        return {}
    low = math.floor(math.log(median_us / 200) / math.log(GAMMA))
    high = math.ceil(math.log(median_us * 200) / math.log(GAMMA))
    edges = GAMMA ** np.arange(low - 1, high + 1, dtype=float)
    cdf = np.array([0.5 * (1 + math.erf(math.log(e / median_us) / (sigma * math.sqrt(2)))) for e in edges])
    share = np.diff(cdf)
    counts = np.round(share * count).astype(np.int64)
    return {int(b): int(c) for b, c in zip(range(low, high + 1), counts, strict=True) if c > 0}


def synthetic_run(folder: Path, messages: float, seconds: int) -> None:
    rate = messages / seconds
    writer = MetricsWriter(folder / "metrics", START)
    for second in range(seconds):
        clients, latencies = [], []
        for p in range(PRODUCERS):
            n = int(rate / PRODUCERS)
            clients.append(
                ClientInterval(
                    client_id=f"p{p}",
                    role="producer",
                    topic="t",
                    target_rate=rate / PRODUCERS,
                    sent=n,
                    acked=n,
                    sent_bytes=n * 512,
                    next_sequence=n * (second + 1),
                )
            )
            latencies.append(
                {
                    ("publish", -1): (bucket_counts(n, 3000, 0.6), n, 300.0, 90_000.0),
                    ("publish_delay", -1): (bucket_counts(n, 200, 0.9), n, 1.0, 20_000.0),
                }
            )
        for c in range(CONSUMERS):
            n = int(rate / CONSUMERS)
            clients.append(
                ClientInterval(
                    client_id=f"c{c}",
                    role="share_consumer",
                    topic="t",
                    group="g",
                    received=n,
                    accepted=n,
                    received_bytes=n * 512,
                    polls=50,
                    delivery_counts={1: n},
                )
            )
            latencies.append({("e2e", c % PARTITIONS): (bucket_counts(n, 8000, 0.7), n, 500.0, 400_000.0)})
        histograms = HistogramColumns.gather(latencies)
        writer.add(worker_report(0, START + second + 1, clients, histograms=histograms), "measure")
        if second % 30 == 29:
            writer.flush()
    writer.flush()
    (folder / "run.json").write_text(json.dumps({"run_id": folder.name, "status": "completed", "load_started": START}))


def peak_memory_while(action) -> tuple[float, float]:
    """(seconds, peak RSS in MiB of this process and its children, the Spark JVM included)."""
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        me = psutil.Process()
        while not done.is_set():
            try:
                rss = me.memory_info().rss + sum(c.memory_info().rss for c in me.children(recursive=True))
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    action()
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    return elapsed, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--messages", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    print(f"{'messages':>12} {'metric rows':>12} {'parquet MiB':>12} {'summary s':>10} {'peak MiB':>9}")
    for messages in args.messages:
        folder = Path(tempfile.mkdtemp(prefix=f"dimster-scale-{messages:.0e}-"))
        synthetic_run(folder, messages, args.seconds)
        files = list((folder / "metrics").rglob("*.parquet"))
        size = sum(f.stat().st_size for f in files) / 2**20
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        seconds, peak = peak_memory_while(lambda folder=folder: summarize(folder, args.master))
        print(f"{messages:>12,.0f} {rows:>12,} {size:>12.1f} {seconds:>10.1f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
