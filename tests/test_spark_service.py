"""dimster's warm Spark server (pipeline/spark_service.py), real PySpark: summaries share one server and
agree figure for figure with one through the server's `sc://` URL (a summary on a driver of its own:
test_summary), two dimster processes summarizing at once included; a server of another PySpark is
replaced by the next summary, on another port when its first is taken; a server frozen mid-summary
is ended, the summary fails in one line and keeps what was written, the next summary starts a new
one; a run's start ahead starts it niced with a warm-up summary of a made-up run beside it, which
the run's end ends if it is still going; `cluster down` of the last cluster ends it, not before; a
Connect URL that answers nothing is one error line. The lifecycle test uses a state folder of its
own, so the session's server is not its to kill."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from dimster.errors import DimsterError
from dimster.pipeline import spark_service
from dimster.pipeline import summary as summary_module
from dimster.pipeline.spark_service import AHEAD_NICE, EMBEDDED, SERVER_JAVA_OPTS, SparkService
from dimster.pipeline.summary import summarize
from dimster.processes import TrackedProcess
from tests.conftest import dimster, one_error_line, unused_port
from tests.synthetic import synthetic_run, unsummarized_copy

pytestmark = pytest.mark.spark


def summary_of(folder: Path, master: str) -> dict:
    """summary.json's content as `master` writes it."""
    return json.loads(json.dumps(summarize(folder, master), default=str))


def test_summaries_share_one_warm_server_and_agree_with_one_through_its_url(tmp_path, spark):
    run = tmp_path / "run"
    run.mkdir()
    samples = synthetic_run(run, seconds=4, consumers=2, per_second=500)
    embedded = summary_of(run, spark)
    server = SparkService().running()
    assert server is not None and embedded["latency_ms"]["e2e"]["count"] == sum(len(v) for v in samples.values())
    through_url = summary_of(run, server.url)  # the same server, named as any Spark Connect server is
    assert SparkService().running() == server  # reused, not started anew
    assert through_url == embedded
    cmdline = psutil.Process(server.process.pid).cmdline()
    assert set(SERVER_JAVA_OPTS.split()) <= set(cmdline) and "-Xmx1g" in cmdline
    assert f"-Ddimster.spark={SparkService().folder}" in cmdline  # whose it is: the suite finds it by that

    # two dimster processes summarize at once on the one server: each its own run, each as alone
    copies = [unsummarized_copy(run, tmp_path / name) for name in ("first", "second")]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda copy: dimster("summarize", str(copy)), copies))
    assert [(r.code, r.stderr) for r in results] == [(0, ""), (0, "")]
    alone = (run / "summary" / "summary.json").read_text()
    assert [(copy / "summary" / "summary.json").read_text() for copy in copies] == [alone, alone]
    assert SparkService().running() == server


def texts_written(run: Path) -> dict[str, str]:
    """summary.json and the CSV tables of a run's summary, by name."""
    return {path.name: path.read_text() for path in (run / "summary").glob("*.*") if path.suffix != ".parquet"}


def test_a_summarys_sections_run_at_once_write_what_they_write_one_after_another(tmp_path, spark, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, seconds=4, consumers=2, per_second=300)
    steps: list[str] = []
    summarize(run, spark, steps.append)
    written = texts_written(run)
    parts = int(steps[1].split()[0])  # the progress line's steps, each part's end said once
    assert steps[:2] == ["starting Spark", f"{parts} parts of the metrics"] and steps[-1] == "writing the tables"
    assert [step.split(" (")[0] for step in steps[2:-1]] == [f"{n} of {parts} parts done" for n in range(1, parts + 1)]
    monkeypatch.setattr(summary_module, "SECTION_THREADS", 1)
    summarize(run, spark)
    assert texts_written(run) == written
    assert {"summary.json", "throughput_per_second.csv", "latency_per_second.csv", "worker_cpu.csv"} <= set(written)


def lowered() -> int:
    """The nice of what dimster starts ahead: AHEAD_NICE more than this process's, read now (the suite
    runs this tier at nice 9 until the kafka tier ends, then gives those levels back, scripts/test.sh)."""
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + AHEAD_NICE)


def test_a_killed_server_is_replaced_and_the_last_cluster_down_ends_it(tmp_path, monkeypatch):
    """`dimster spark status` before and after; a server of another PySpark is replaced, on another
    port when the first is taken; one frozen mid-summary is killed, and the next summary replaces it;
    another cluster of the state folder recorded up keeps the server through a `cluster down`, the
    last one down ends it. The server of another PySpark is a stand-in: a process that listens on a
    port, recorded as an older PySpark's server would be (a real one would cost a Spark start more,
    and dimster reads no more of it than its record, its life and its port)."""
    state = tmp_path / "state"
    monkeypatch.setenv("DIMSTER_STATE_DIR", str(state))  # the dimster commands below inherit it
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, seconds=3, consumers=1, per_second=200)
    listener = (
        "import socket, time\ns = socket.create_server(('127.0.0.1', 0))\n"
        "print(s.getsockname()[1], flush=True)\ntime.sleep(300)"
    )
    older = subprocess.Popen([sys.executable, "-c", listener], stdout=subprocess.PIPE, text=True)
    try:
        assert dimster("spark", "status").code == 1  # none yet: the first summary starts it
        assert older.stdout is not None
        older_port = int(older.stdout.readline())
        record = SparkService().folder / "spark.json"
        record.parent.mkdir(parents=True)
        tracked = TrackedProcess.of(older.pid)
        recorded = {"pid": older.pid, "started": tracked.started, "port": older_port, "version": "3.5.1"}
        record.write_text(json.dumps(recorded))
        assert json.loads(dimster("spark", "status", "--json").stdout)["pid"] == older.pid
        with socket.socket() as taken, monkeypatch.context() as patched:  # the first free port it is given
            taken.bind(("127.0.0.1", 0))  # is taken before it binds it
            taken.listen()
            held = taken.getsockname()[1]
            ports = [held, unused_port()]
            patched.setattr(spark_service, "_free_port", lambda: ports.pop(0))
            written = summarize(run, EMBEDDED)
        assert written["throughput"]["seconds"] == 3 and ports == []
        # dimster ended it and reaped it (it is this test's child: Popen would read its exit as 0)
        assert not tracked.alive()
        first = json.loads(dimster("spark", "status", "--json").stdout)
        hung = SparkService().running()
        assert hung is not None and first["running"] and first["url"] == f"sc://127.0.0.1:{hung.port}"
        assert first["pid"] == hung.process.pid and hung.port not in (held, older_port)

        def stop_it(step: str) -> None:  # frozen once the summary has its session and asks its queries
            if step.endswith("parts of the metrics"):
                os.kill(hung.process.pid, signal.SIGSTOP)

        monkeypatch.setattr(spark_service, "STALL_SECONDS", 4.0)
        before = (run / "summary" / "summary.json").read_text()
        with pytest.raises(DimsterError) as failed:
            summarize(run, EMBEDDED, stop_it)
        assert str(failed.value).startswith(f"Spark could not summarize {run}: ")
        ended = "(dimster's Spark server ran no code for 4 s: it was ended; the next summary starts a new one)"
        assert str(failed.value).endswith(ended)
        assert not hung.process.alive() and (run / "summary" / "summary.json").read_text() == before
        # a server that died is replaced: here by a run that will summarize, as it begins (in the
        # background, at a low priority); its summary waits for that server rather than start another
        ahead = SparkService().start_ahead()
        assert ahead is not None
        while (server := SparkService().running()) is None:  # spawned and recorded, not yet listening
            assert ahead.is_alive()
            time.sleep(0.05)
        ahead.join(timeout=120)  # the server listens: its warm-up summary (warm_up.py) has begun
        [warm_up] = spark_service._warm_ups
        while psutil.Process(warm_up.pid).cmdline()[0] == "nice":
            time.sleep(0.05)  # `nice` sets its priority, then becomes python (its command line names both)
        assert psutil.Process(warm_up.pid).nice() == lowered()
        deadline = time.monotonic() + 120
        while warm_up.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        said = (SparkService().folder / "warm-up.log").read_text()
        assert not warm_up.alive() and said.startswith("warm-up summary done in "), said
        result = dimster("summarize", str(run))  # the CLI's summary, on the server started ahead
        assert result.code == 0 and result.stderr == "", result.stderr
        assert (run / "summary" / "summary.json").read_text() == before
        assert SparkService().running() == server and server.process.pid != hung.process.pid
        assert psutil.Process(server.process.pid).nice() == lowered()
        SparkService()._warm_up(server)  # one still going as the run ends: settle_ahead ends it
        [going] = spark_service._warm_ups[1:]
        assert going.alive()
        SparkService.settle_ahead()
        assert not going.alive() and spark_service._warm_ups == []
        SparkService()._warm_up(server)  # and none begins after
        assert spark_service._warm_ups == []
        assert SparkService().start_ahead() is None  # one runs: nothing to start
        other = state / "clusters" / "other" / "state.json"
        other.parent.mkdir(parents=True)
        other.write_text("{}")  # what `cluster up` of another environment leaves while it runs
        assert dimster("cluster", "down", "local").code == 0
        assert SparkService().running() == server
        other.unlink()
        assert dimster("cluster", "down", "local").code == 0
        assert SparkService().running() is None and not server.process.alive()
        assert dimster("spark", "status").code == 1
        assert dimster("spark", "stop").stdout.strip() == "dimster's Spark server was not running"
    finally:
        SparkService().stop()
        older.kill()
        older.wait()


def test_a_connect_url_that_answers_nothing_is_one_error_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, seconds=2, consumers=1, per_second=100)
    port = unused_port()  # a loopback port nothing listens on
    result = dimster("summarize", str(run), "--spark-master", f"sc://127.0.0.1:{port}", timeout=120)
    one_error_line(result, f"could not reach Spark at sc://127.0.0.1:{port}: Connection refused", code=None)
    assert (run / "metrics").is_dir() and not (run / "summary" / "summary.json").exists()


def test_the_warm_up_run_takes_every_part_of_a_summary(tmp_path, spark):
    """The made-up run a new server summarizes first (warm_up.py) has every table, so that each part's
    queries are compiled before a run's own summary asks them."""
    from dimster.pipeline.warm_up import write_made_up_run

    write_made_up_run(tmp_path)
    steps: list[str] = []
    written = summarize(tmp_path, spark, steps.append)
    parts = {step.split("(")[1].rstrip(")") for step in steps if " parts done (" in step}
    assert "9 parts of the metrics" in steps and len(parts) == 9, steps
    assert written["notes"] == [] and written["brokers"]["requests"] and written["broker_lag"], written["notes"]
