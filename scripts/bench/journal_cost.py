"""What the run's journal (dimster/coordinator/account/journal.py) costs the coordinator per report, beside
decoding the report, and what it writes: the reports of one worker of 30 clients (15 producers, 15
share consumers) as `scale_workers.py` builds them for the scale benchmark. No Kafka is involved.

    .venv/bin/python scripts/bench/journal_cost.py [--reports 300] [--repeat 5]

Prints, for the best of the repeats, the microseconds per report to decode it and to journal it, and
the bytes each file of the journal takes per report.
"""

import argparse
import tempfile
import time
from pathlib import Path

from scale_workers import FakeFleet

from dimster.coordinator.account.journal import RunJournal
from dimster.worker.protocol import Assignment, ConsumerSpec, ProducerSpec, decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    producers = [ProducerSpec(i, "t0", i) for i in range(15)]
    consumers = [ConsumerSpec(i, "t0", "g0", "SHARE_GROUP") for i in range(15)]
    fleet = FakeFleet(rate=10, per_agent=1)
    fleet.place([Assignment(0, "127.0.0.1:1", {}, producers, consumers, 15, 5, "", "4.3.1")])
    wire = [fleet.report([0], 1000.0 + i) for i in range(args.reports)]
    decode_s = journal_s = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        reports = [decode(data).report for data in wire]  # type: ignore[attr-defined]
        decode_s = min(decode_s, time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as folder:
            journal = RunJournal(Path(folder))
            started = time.perf_counter()
            for report in reports:
                journal.report(report, "measure", 0)
            journal_s = min(journal_s, time.perf_counter() - started)
            sizes = journal.path.stat().st_size, journal.tail_path.stat().st_size
            journal.close()
    per = 1e6 / args.reports
    print(f"report of 30 clients: {sum(map(len, wire)) / len(wire):,.0f} bytes on the wire")
    print(f"decode {decode_s * per:,.0f} us/report, journal {journal_s * per:,.0f} us/report")
    print(f"journal.msgpack {sizes[0] / args.reports:,.0f} bytes/report, journal-tail {sizes[1] / args.reports:,.0f}")


if __name__ == "__main__":
    main()
