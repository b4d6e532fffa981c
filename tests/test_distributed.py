"""Workers on agents in network namespaces of the test's own, against a real cluster listening on the
test network's bridge: a run across two "hosts", a clock skewed by libfaketime and corrected, and an
agent SIGKILLed mid-run under each onWorkerLoss."""

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.agents import running_agent, write_token
from tests.conftest import REPO, dimster, spare_ports_yaml, write_environment
from tests.netns import private_network
from tests.runs import only_bundle, run_info, table, write_workload

pytestmark = pytest.mark.kafka

AGENT_PORT = 7700
SKEW = 2.0  # seconds the skewed agent's clock is ahead
# A killed share consumer's records come back after the lock duration, its membership goes after the
# session timeout: short here so that the run after a loss stays short.
SHARE_OVERRIDES = {
    "group.share.record.lock.duration.ms": 3000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.min.session.timeout.ms": 6000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 1000,
    "group.share.heartbeat.interval.ms": 1000,
}


@pytest.fixture(scope="module")
def setting(tmp_path_factory, scratch_project):
    """Two namespaces and a one-node cluster on the bridge (profile `dcluster`); yields what the tests
    need to write profiles for runs through it. All torn down at the end, also on failure."""
    folder = tmp_path_factory.mktemp("distributed")
    project = folder / "project"
    __import__("shutil").copytree(scratch_project / "run", project / "run")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    with private_network(2) as net:
        overrides = "".join(f"  {k}: {v}\n" for k, v in SHARE_OVERRIDES.items())
        write_environment(
            project,
            "dcluster",
            f"backend: local\nnodes: 1\nheap: 512m\nhost: {net.bridge_address}\n{spare_ports_yaml(3)}"
            f"brokerOverrides:\n{overrides}",
        )
        try:
            up = dimster("cluster", "up", "dcluster", env=env)
            assert up.code == 0, up.stderr
            status = json.loads(dimster("cluster", "status", "dcluster", "--json", env=env).stdout)
            yield {"net": net, "project": project, "env": env, "bootstrap": status["bootstrap_servers"],
                   "folder": folder, "token_file": write_token(folder)}  # fmt: skip
        finally:
            down = dimster("cluster", "down", "dcluster", "--purge", env=env)
            assert down.code == 0, down.stderr


def agents_profile(setting, name: str, **keys) -> str:
    """An external profile on the test cluster whose workers are the agents in the namespaces."""
    agents = "".join(f"  - address: {address}:{AGENT_PORT}\n" for _, address in setting["net"].hosts)
    extra = "".join(f"{k}: {v}\n" for k, v in keys.items())
    text = (
        f"backend: external\nbootstrapServers: {setting['bootstrap']}\nworkers:\n{agents}"
        f"workerTokenFile: {setting['token_file']}\n{extra}"
    )
    write_environment(setting["project"], name, text)
    return name


def agent(setting, index: int, log_name: str, skew: float | None = None):
    namespace, address = setting["net"].hosts[index]
    log = setting["folder"] / f"{log_name}-agent-{index}.log"
    # its runs' folders go under the test's, so that a killed agent (the loss tests) leaves none in /tmp
    work_dir = setting["folder"] / f"{log_name}-agent-{index}"
    work_dir.mkdir(exist_ok=True)
    return running_agent(
        f"{address}:{AGENT_PORT}", setting["token_file"], log, netns=namespace, skew=skew, work_dir=work_dir
    )


def run(setting, profile: str, tmp_path, name: str, **keys):
    tmp_path.mkdir(parents=True, exist_ok=True)
    workload = write_workload(tmp_path, name, **keys)
    results = tmp_path / "results"
    result = dimster("run", profile, "-w", str(workload), "--results", str(results), "--no-summary", env=setting["env"])
    return result, only_bundle(results)


ONE_EACH = {"producersPerTopic": 1, "consumersPerGroup": 1, "partitionsPerTopic": 2, "producerRate": 200,
            "warmupSeconds": 2, "durationSeconds": 8}  # fmt: skip


def test_a_run_across_two_namespaces_with_java_clients_and_a_skewed_clock_corrected(setting, tmp_path):
    """The producer lands on worker 0 (first namespace), the consumer on worker 1 (second namespace),
    whose clock runs SKEW ahead; both run Kafka's Java clients of the cluster's version, each agent
    from its own cache."""
    profile = agents_profile(setting, "dagents")
    with agent(setting, 0, "skewed"), agent(setting, 1, "skewed", skew=SKEW):
        result, bundle = run(setting, profile, tmp_path, "skewed", clientLibrary="java", **ONE_EACH)
    assert result.code == 0, result.stderr + result.stdout
    info = run_info(bundle)
    totals = info["totals"]
    assert info["status"] == "completed" and totals["lost"] == 0
    assert totals["sent"] == totals["acked"] == totals["received"] > 0
    assert [w["address"].split(":")[0] for w in info["workers"]] == [a for _, a in setting["net"].hosts]
    assert set(table(bundle, "intervals")["library"]) == {"java"}
    for index in (0, 1):  # each agent's worker log and its Java clients' log came back into the bundle
        assert (bundle / "logs" / f"worker-{index}.log").is_file()
        assert (bundle / "logs" / f"worker-{index}.java.log").is_file()
    # The offsets are measured, not assumed: agent 1's clock is found SKEW ahead, agent 0's not. Within a
    # quarter of the skew: the estimate's error is half a round trip on the test's own bridge.
    offsets = info["clock_offsets"]
    assert all(offset["samples"] >= 5 for offset in offsets.values()), offsets
    assert abs(offsets["0"]["offset_ms"]) < SKEW * 1000 / 4
    assert offsets["1"]["offset_ms"] == pytest.approx(SKEW * 1000, abs=SKEW * 1000 / 4)
    # Uncorrected, the consumer's clock would add the whole skew to every end-to-end latency.
    assert info["e2e_ms"]["p50"] < SKEW * 1000 / 2, info["e2e_ms"]


# A lost agent's last settled records never reach the coordinator (in doubt): the drain cannot empty
# the backlog and waits out its time-out, a short one here.
LOSS = {"producersPerTopic": 2, "consumersPerGroup": 2, "partitionsPerTopic": 2, "producerRate": 200,
        "warmupSeconds": 1, "durationSeconds": 10, "drainTimeoutSeconds": 8}  # fmt: skip


def run_and_kill_agent_1(setting, profile: str, tmp_path, name: str):
    """Start a run, SIGKILL the second agent a few seconds into load, return (exit code, output, bundle)."""
    workload = write_workload(tmp_path, name, **LOSS)
    results = tmp_path / "results"
    with agent(setting, 0, name), agent(setting, 1, name) as doomed:
        command = [sys.executable, "-m", "dimster", "run", profile, "-w", str(workload), "--results", str(results),
                   "--no-summary"]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=REPO, env={**__import__("os").environ, **setting["env"]}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            for _ in range(120):  # until the run has registered (exit 5: no run yet), then until 4 s of load
                waited = dimster(
                    "wait", profile, "--until", "elapsedSeconds >= 4", "--timeout", "120", env=setting["env"]
                )
                if waited.code != 5 or process.poll() is not None:
                    break
                time.sleep(0.5)
            ended = process.poll() is not None  # the run's own output says why it ended before 4 s of load
            assert waited.code == 0, (waited.stderr, ended and process.communicate()[0])
            doomed.send_signal(signal.SIGKILL)
            output, _ = process.communicate(timeout=240)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode, output, only_bundle(results)


def events(bundle) -> list[dict]:
    return [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]


def test_a_lost_agent_fails_the_run_with_exit_4_and_keeps_its_numbers(setting, tmp_path):
    profile = agents_profile(setting, "dfail", workerTimeoutSeconds=3, onWorkerLoss="fail")
    code, output, bundle = run_and_kill_agent_1(setting, profile, tmp_path, "lossfail")
    assert code == 4, output
    info = run_info(bundle)
    assert info["status"] == "failed" and "agent" in info["failure"] and "silent for 3s" in info["failure"]
    assert info["totals"]["sent"] > 0 and info["totals"]["received"] > 0
    assert list((bundle / "metrics").rglob("*.parquet"))  # what was measured is kept
    [lost] = [e for e in events(bundle) if e["event"] == "worker_lost"]
    assert lost["worker"] == 1 and lost["clients"] == ["c0", "c1"]  # agent 0 has the producers
    assert (bundle / "logs" / "worker-0.log").is_file() and (bundle / "logs" / "worker-1.log.missing").is_file()


def test_with_continue_a_lost_agents_clients_go_on_elsewhere_and_nothing_is_lost(setting, tmp_path):
    profile = agents_profile(setting, "dcontinue", workerTimeoutSeconds=3, onWorkerLoss="continue")
    code, output, bundle = run_and_kill_agent_1(setting, profile, tmp_path, "losscontinue")
    assert code == 0, output
    info = run_info(bundle)
    assert info["status"] == "completed", output
    assert info["totals"]["lost"] == 0, info["totals"]
    [replaced] = [e for e in events(bundle) if e["event"] == "clients_replaced"]
    assert replaced["lost"] == ["c0", "c1"] and replaced["new"] == {"c2": 0, "c3": 0}
    assert "go on as c2 on worker 0, c3 on worker 0" in output
