"""The wait at a run's end on a warm Spark: what `dimster run` does after `run_ended` (the summary, then
the report) timed on dimster's Spark server, for a short run like the quickstart's and a 10-minute one,
with the summary's sections run one after another (as before) and at once (SECTION_THREADS), paired
round by round. A first summary starts the server and is reported apart (its start-up included).

    .venv/bin/python scripts/bench/summary_wait.py [--repeat 5] [--run RUN_DIR ...]

Without --run it summarizes two synthetic runs (summary_scale.py's): 60 s and 600 s of 3 producers and
12 share consumers at 1,000 msg/s. Each --run folder is summarized in place (its summary/ and report are
rewritten). The server is the one of DIMSTER_STATE_DIR (dimster's default state folder otherwise); the
script stops it at the end only if it started it."""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from summary_scale import synthetic_run  # beside this script

from dimster.cli.summary import summarize_after_run
from dimster.pipeline import summary as summary_module
from dimster.pipeline.spark_service import EMBEDDED, SparkService

SHORT_SECONDS, LONG_SECONDS, MESSAGES_PER_SECOND = 60, 600, 1000


def timed_end_of_run(folder: Path, threads: int) -> float:
    summary_module.SECTION_THREADS = threads
    started = time.perf_counter()
    if summarize_after_run(folder, EMBEDDED) is None:
        raise SystemExit(f"{folder} could not be summarized: see the line above")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--run", type=Path, nargs="*", default=[], help="run folders to summarize in place")
    args = parser.parse_args()
    runs = list(args.run)
    if not runs:
        for seconds in (SHORT_SECONDS, LONG_SECONDS):
            folder = Path(tempfile.mkdtemp(prefix=f"dimster-wait-{seconds}s-"))
            synthetic_run(folder, MESSAGES_PER_SECOND * seconds, seconds)
            runs.append(folder)
    started_here = SparkService().running() is None
    concurrent = summary_module.SECTION_THREADS
    try:
        first = timed_end_of_run(runs[0], concurrent)
        print(f"first summary{' (server started by it)' if started_here else ''}: {first:.1f} s ({runs[0].name})")
        print(f"{'run':<34} {'one after another s':>20} {f'{concurrent} at once s':>12} {'ratio':>6}")
        for folder in runs:
            times: dict[int, list[float]] = {1: [], concurrent: []}
            for round_ in range(args.repeat):  # paired, each side first every other round
                for threads in (1, concurrent) if round_ % 2 == 0 else (concurrent, 1):
                    times[threads].append(timed_end_of_run(folder, threads))
            serial, parallel = statistics.median(times[1]), statistics.median(times[concurrent])
            print(f"{folder.name:<34} {serial:>20.1f} {parallel:>12.1f} {parallel / serial:>6.2f}")
            print(f"  one after another: {', '.join(f'{t:.1f}' for t in times[1])}")
            print(f"  at once:           {', '.join(f'{t:.1f}' for t in times[concurrent])}")
    finally:
        if started_here:
            SparkService().stop()


if __name__ == "__main__":
    main()
