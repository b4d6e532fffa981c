"""More bad input and noise: each problem is one `dimster: error:` line with its exit code, never a
traceback or an "internal error"; other tools' output goes to log files, not the console."""

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dimster.coordinator.control.api import ControlServer
from dimster.coordinator.control.run_state import TOKEN_HEADER
from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.errors import ClusterError
from dimster.kafka.distribution import kafka_distribution, version_home
from dimster.kafka.helper import run_helper
from dimster.kafka.jmx_exporter import agent_jar
from dimster.pipeline.spark_service import SparkService
from dimster.processes import TrackedProcess
from dimster.results.bundle import mark_crashed
from tests.conftest import dimster, one_error_line, spare_ports_yaml, write_environment
from tests.synthetic import synthetic_run


# ---- input files ----------------------------------------------------------------------------------
@pytest.mark.unit
def test_workload_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\nproducerRate: 10\n".encode("latin-1"))
    one_error_line(dimster("validate", str(path)), "latin1.yaml", "not UTF-8", "0xe9")


@pytest.mark.unit
def test_workload_with_a_control_character(tmp_path):
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"name: x\x00\n")
    one_error_line(dimster("validate", str(path)), "nul.yaml", "YAML syntax error")


@pytest.mark.unit
def test_corrupt_cluster_state_file(project, state_dir):
    """A state.json cut short (a full disk, a crash) names the file instead of failing inside."""
    write_environment(project, "corrupt", "nodes: 1\n" + spare_ports_yaml())
    state = state_dir / "clusters" / "corrupt" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"kafka_version": "4.3.1", "nodes": [{"node_id": 1, "pi')
    result = dimster("cluster", "status", "corrupt", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "state.json", code=3)


@pytest.mark.spark
def test_corrupt_run_json_is_summarized_with_a_note_and_spark_stays_quiet(tmp_path):
    """`dimster summarize` whole, on dimster's warm Spark server (the default): its JVM's words go to its
    own log, not to the user's console."""
    synthetic_run(tmp_path, seconds=3)
    (tmp_path / "run.json").write_text('{"run_id": "r", "sta')
    result = dimster("summarize", str(tmp_path))
    assert result.code == 0, result.stderr
    summary = json.loads((tmp_path / "summary" / "summary.json").read_text())
    assert "run.json is unreadable: versions, totals and status unknown" in summary["notes"]
    assert summary["throughput"]["seconds"] == 3
    assert "note: run.json is unreadable" in result.stdout  # the notes are said, not only written
    # Spark's JVM writes to its log, not to the user's console
    assert result.stderr == "", result.stderr
    assert "WARN" not in result.stdout and "log level" not in result.stdout
    assert "incubator" in SparkService().log.read_text()


# ---- environment names ----------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    "command",
    [
        ["status", "../x"],
        ["stop", "../x"],
        ["wait", "../x", "--until", "backlog<1"],
        ["run", "../environments/local", "-w", "run/workloads/quickstart.yaml"],
        ["run", "a/b", "--modify", "--set", "producerRate=1"],
    ],
)
def test_environment_name_that_is_a_path(command):
    one_error_line(dimster(*command), "invalid environment name")


@pytest.mark.unit
@pytest.mark.parametrize("command", [["cluster", "status", "../environments/local"], ["cluster", "up", "../x"]])
def test_cluster_environment_name_that_is_a_path(command):
    """`../environments/local` must not reach the `local` profile through a path (environment.py's check)."""
    one_error_line(dimster(*command), "invalid environment name")


# ---- usage errors -----------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        (["run"], "Missing argument"),
        (["wait", "local"], "Missing option '--until'"),
        (["status", "local", "--bogus"], "No such option"),
        (["wait", "local", "--until", "backlog<1", "--timeout", "soon"], "'--timeout'"),
        (["cluster", "frob"], "No such command 'frob'"),
    ],
)
def test_usage_error_is_one_line(command, fragment):
    line = one_error_line(dimster(*command), fragment)
    assert "-h`" in line  # says where the usage is


# ---- the control API --------------------------------------------------------------------------------
@pytest.mark.unit
def test_control_api_answers_a_bad_content_length_and_keeps_serving():
    server = ControlServer("control-api-test")
    server.start({"run_id": "r", "results": None, "workload": "w", "phase": "running"})

    def coordinator() -> None:
        request = server.requests.get()
        request.reply({"phase": "running", "settings": {"sasl.password": "hunter22"}})

    threading.Thread(target=coordinator, daemon=True).start()

    def ask(method: str, length: str) -> tuple[int, dict]:
        head = f"{method} /status HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {server.token}\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall((head + (f"Content-Length: {length}\r\n" if length else "") + "\r\n").encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.decode().partition("\r\n\r\n")
        return int(head.split()[1]), json.loads(body)

    try:
        for length in ("abc", "-5", "99999999999"):
            status, body = ask("GET", length)
            assert status == 400 and "Content-Length" in body["error"]
        status, body = ask("GET", "")  # still serving; the answer is redacted on the way out
        assert status == 200 and body["settings"] == {"sasl.password": "***"}
    finally:
        server.close()


# ---- helpers and fetching Kafka ---------------------------------------------------------------------
@pytest.mark.unit
def test_helper_time_out_is_a_cluster_error():
    """The timeout is the task's whole time, checked before each line is read: none ends in 0 s, and
    nothing of the helper's speed or state decides it. (A 1 ms limit on each line was a race: the fresh
    clone of 231fd36 saw no error, on a host busy with the kafka tier.)"""
    distribution = kafka_distribution(DEFAULT_KAFKA_VERSION, fetch=False)
    with pytest.raises(ClusterError, match=r"Kafka helper 'configdefs' did not finish within 0 s"):
        run_helper(distribution, "configdefs", timeout=0)
    answer = run_helper(distribution, "configdefs", timeout=120)  # the helper still serves
    assert answer.returncode == 0 and "log.retention.ms" in answer.stdout


def fake_mvn(folder: Path, body: str) -> dict[str, str]:
    """Environment variables that put an `mvn` running `body` first on PATH, with a fresh cache."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(
        "#!/bin/sh\n"
        'for arg; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done\n'
        'echo "[INFO] Scanning for projects..."\n'
        'echo "[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/x.jar (1 kB at 1 kB/s)"\n'
        f"{body}\n"
    )
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "DIMSTER_CACHE_DIR": str(folder / "cache"),
        "KAFKA_HOME": "",
    }


@pytest.mark.unit
def test_kafka_fetch_failure_is_one_line_with_mvns_log(tmp_path):
    env = fake_mvn(tmp_path, 'echo "[ERROR] Failed to execute goal: Could not resolve dependencies"; exit 1')
    result = dimster("kafka", "fetch", "--version", "4.9.9", env=env)
    assert result.code == 2 and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("dimster: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "could not fetch Apache Kafka 4.9.9" in errors[0] and "Could not resolve dependencies" in errors[0]
    log = tmp_path / "cache" / "kafka" / "4.9.9" / "fetch.log"
    assert str(log) in errors[0] and "Scanning for projects" in log.read_text()
    assert "Scanning for projects" in result.stderr  # mvn's last lines follow the error, as its detail


@pytest.mark.unit
def test_a_jmx_exporter_agent_that_cannot_be_fetched_is_one_line(tmp_path):
    env = fake_mvn(
        tmp_path, 'echo "[ERROR] Could not find artifact io.prometheus.jmx:jmx_prometheus_javaagent"; exit 1'
    )
    jars = version_home(DEFAULT_KAFKA_VERSION) / "libs"
    (tmp_path / "cache" / "kafka").mkdir(parents=True)
    (tmp_path / "cache" / "kafka" / DEFAULT_KAFKA_VERSION).mkdir()
    (tmp_path / "cache" / "kafka" / DEFAULT_KAFKA_VERSION / "libs").symlink_to(jars)  # Kafka is there, the agent not
    result = dimster("kafka", "fetch", "--version", DEFAULT_KAFKA_VERSION, env=env)
    assert result.code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("dimster: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "jmx_prometheus_javaagent" in errors[0] and "Could not find artifact" in errors[0]


@pytest.mark.kafka
def test_cluster_up_json_on_a_fresh_cache_is_valid_json(tmp_path, project):
    """The fetch's progress goes to stderr and mvn's output to its log: stdout is the JSON alone."""
    jars = version_home(DEFAULT_KAFKA_VERSION) / "libs"
    copy = f'case "$*" in *jmx_prometheus_javaagent*) cp {agent_jar()} "$out"/;; *) cp {jars}/*.jar "$out"/;; esac'
    env = fake_mvn(tmp_path, f'mkdir -p "$out" && {copy}')
    env["DIMSTER_PROJECT_DIR"] = str(project)
    write_environment(project, "fresh", f"nodes: 1\nkafkaVersion: {DEFAULT_KAFKA_VERSION}\n" + spare_ports_yaml())
    try:
        result = dimster("cluster", "up", "fresh", "--json", env=env)
        assert result.code == 0, result.stderr
        assert json.loads(result.stdout)["environment"] == "fresh"
        assert f"fetching Apache Kafka {DEFAULT_KAFKA_VERSION}" in result.stderr
        assert "Scanning for projects" not in result.stderr + result.stdout
    finally:
        assert dimster("cluster", "down", "fresh", env=env).code == 0


@pytest.mark.unit
@pytest.mark.parametrize("command", [("cluster", "up"), ("cluster", "redeploy"), ("run",)])
def test_a_docker_daemon_that_is_not_running_is_one_line(project, tmp_path, command):
    socket_path = tmp_path / "no-daemon.sock"
    write_environment(
        project, "nodaemon", f"backend: docker\ndockerHost: unix://{socket_path}\n{spare_ports_yaml(backend='docker')}"
    )
    workload = ("-w", "run/workloads/quickstart.yaml") if command == ("run",) else ()
    result = dimster(*command, "nodaemon", *workload, env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, f"no Docker daemon answers at unix://{socket_path}", "podman system service", code=2)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("workers", "fragment"),
    [
        ("{docker: 0}", "workers.docker: Input should be greater than or equal to 1"),
        ("{dockr: 2}", "workers.docker: Field required"),
    ],
)
def test_bad_docker_workers_name_their_key(project, workers, fragment):
    write_environment(project, "badworkers", f"backend: docker\nworkers: {workers}\n")
    result = dimster("cluster", "status", "badworkers", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/environments/badworkers.yaml", fragment, "{docker: N}", code=2)


@pytest.mark.unit
def test_workers_for_one_run_replace_a_count_or_a_container_count_and_nothing_else(project, monkeypatch):
    from dimster.environment import load_environment, with_worker_count

    env = {"DIMSTER_PROJECT_DIR": str(project)}
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    local = load_environment("local")
    assert with_worker_count(local, None) is local and with_worker_count(local, 3).workers == 3
    write_environment(project, "boxes", "backend: docker\nworkers: {docker: 2, image: mine:1}\n")
    boxes = with_worker_count(load_environment("boxes"), 4).workers
    assert (boxes.docker, boxes.image) == (4, "mine:1")
    write_environment(project, "agents", "workers: [{address: 127.0.0.1:1}]\n")
    workload = Path(__file__).parent / "workloads" / "good" / "minimal.yaml"
    cases = [
        (("run", "agents", "-w", str(workload), "--workers", "2"), "'agents' lists its agents"),
        (("run", "local", "-w", str(workload), "--workers", "0"), "--workers 0: give a count from 1 to 64"),
        (
            ("run", "local", "--modify", "--workers", "2", "--set", "producerRate=5"),
            "--workers is set when a run starts",
        ),
    ]
    for args, expected in cases:
        result = dimster(*args, env=env)
        assert result.code == 2 and len(result.error_lines) == 1 and "Traceback" not in result.stderr
        assert expected in result.error_lines[0], result.stderr


@pytest.mark.unit
def test_a_crash_that_summarize_marked_first_still_keeps_the_detached_console(tmp_path):
    """`dimster summarize` of the bundle may mark the crash before any command reads the state file:
    the console is copied all the same, once; a run that recorded its end gets none."""
    run_dir, console = tmp_path / "run", tmp_path / "local.console.log"
    (run_dir / "logs").mkdir(parents=True)
    console.write_text("rdkafka_queue.c:87: assert: rkq->rkq_refcnt > 0\n")
    (run_dir / "run.json").write_text(json.dumps({"status": "crashed"}))
    assert not mark_crashed(run_dir, 1, console)
    kept = run_dir / "logs" / "coordinator-output.log"
    assert kept.read_text() == console.read_text()
    console.write_text("the next run's console\n")
    assert not mark_crashed(run_dir, 1, console) and "rkq_refcnt" in kept.read_text()  # the first copy stays
    kept.unlink()
    (run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
    assert not mark_crashed(run_dir, 1, console) and not kept.exists()


@pytest.mark.unit
def test_a_run_whose_coordinator_was_killed_is_called_crashed_once(tmp_path):
    """kill -9 of the coordinator leaves its state file and a run.json that says running: the next
    `status` says the run crashed and where its results are, and its run.json says crashed. A
    detached run's console output (where a C library's last words go) is kept with its bundle."""
    results = tmp_path / "results" / "20261127T000000Z-w"
    (results / "logs").mkdir(parents=True)
    console = tmp_path / "state" / "runs" / "crashenv.console.log"
    (tmp_path / "state" / "runs").mkdir(parents=True)
    console.write_text("rdkafka_broker.c:1234: assert: rkb->rkb_state == RD_KAFKA_BROKER_STATE_UP\n")
    (results / "run.json").write_text(json.dumps({"run_id": results.name, "status": "running"}))
    coordinator = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    started = TrackedProcess.of(coordinator.pid).started
    coordinator.kill()
    coordinator.wait()
    state = {"pid": coordinator.pid, "started": started, "port": 1, "token": "t", "results": str(results)}
    (tmp_path / "state" / "runs" / "crashenv.json").write_text(json.dumps({**state, "console": str(console)}))
    env = {"DIMSTER_STATE_DIR": str(tmp_path / "state")}
    crashed = dimster("status", "crashenv", env=env)
    line = one_error_line(crashed, f"the run of 'crashenv' crashed: its coordinator (pid {coordinator.pid})", code=5)
    kept = results / "logs" / "coordinator-output.log"
    assert str(results) in line and f"its console output: {kept}" in line
    assert kept.read_text() == console.read_text()
    console.write_text("the next detached run's console\n")  # the environment's file, written anew
    assert "assert: rkb->rkb_state" in kept.read_text()
    info = json.loads((results / "run.json").read_text())
    assert info["status"] == "crashed" and str(coordinator.pid) in info["failure"]
    again = dimster("status", "crashenv", env=env)
    assert again.code == 5 and "no run is active for 'crashenv'" in again.error_lines[0]
