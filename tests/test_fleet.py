"""A fleet on one host: 8 agents (`dimster worker serve --workers 2`, processes on loopback) run the 16
workers of one run, 208 clients (96 producers, 112 share consumers) on the session's local cluster,
through a live --modify of the rate. The account closes with nothing lost; worker i runs on agent
i mod 8; the status after the change and the console's last line say what the bundle says."""

import contextlib
import re
import time

import pytest

from dimster.coordinator.control.run_state import console_log
from tests.agents import running_agent, write_token
from tests.conftest import spare_ports, write_environment
from tests.runs import (
    detached_evidence,
    evidence,
    modifications,
    modify,
    no_loss,
    run_info,
    start_detached,
    status,
    stop,
    table,
    wait,
)

pytestmark = pytest.mark.kafka

AGENTS, SLOTS, PRODUCERS, CONSUMERS = 8, 2, 96, 112
# What the fleet asks of the session's one broker is kept small: at 960 msg/s in batches of one record
# (10 msg/s a producer, linger 20 ms) and 112 heartbeats every 250 ms, the broker beside the suite was
# fenced by its own controller again and again, its Produce requests timed out, and librdkafka's
# producers, not idempotent by default, sent retried batches twice (117 records written twice, each
# received once: counted as duplicates, rightly) and gave up on 66 at close. Here 5 msg/s a producer in
# batches of 100 ms, heartbeats every second, and idempotent producers: a retried batch is written once.
FLEET = {
    "partitionsPerTopic": 8,
    "producersPerTopic": PRODUCERS,
    "consumersPerGroup": CONSUMERS,
    "producerRate": 480,
    "warmupSeconds": 0,
    "reportIntervalSeconds": 2,
    "drainTimeoutSeconds": 60,
    "kafkaConfig": {"producerConfig": {"linger.ms": 100, "enable.idempotence": True}},
    "groupConfig": {"share.heartbeat.interval.ms": 1000},
}


def test_eight_agents_of_two_workers_run_208_clients_through_a_live_change(
    local_cluster, project, tmp_path, monkeypatch
):
    addresses = [f"127.0.0.1:{spare_ports(5)['brokerPortBase'] + i}" for i in range(AGENTS)]
    token = write_token(tmp_path)
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))  # its `fleet` profile, for every command
    listed = "".join(f"  - address: {address}\n" for address in addresses)
    write_environment(
        project, "fleet", f"backend: external\nbootstrapServers: {local_cluster}\nworkers:\n{listed}"
        f"workerTokenFile: {token}\nworkerTimeoutSeconds: 60\n",
    )  # fmt: skip
    with contextlib.ExitStack() as agents:
        for i, address in enumerate(addresses):
            work_dir = tmp_path / f"agent-{i}"
            work_dir.mkdir()
            options = ("--workers", str(SLOTS))
            agents.enter_context(
                running_agent(address, token, tmp_path / f"agent-{i}.log", work_dir=work_dir, options=options)
            )
        bundle = start_detached(tmp_path, "fleet", env="fleet", **FLEET)
        try:
            wait("received>=2000", timeout=180, env="fleet")
            live = status("fleet")
            assert (live["producers"], live["consumers"]) == (PRODUCERS, CONSUMERS), live
            [change] = modify("producerRate=960", env="fleet")["applied"]
            assert change["key"] == "producerRate", change
            wait(f"received>={status('fleet')['received'] + 4000}", timeout=180, env="fleet")
            after, asked_at = status("fleet"), time.time()  # the change held, as the status tells it
        except AssertionError as e:
            raise AssertionError(f"{e}\n{detached_evidence(f'results in {bundle};', 'fleet')}") from None
        finally:
            stop(env="fleet")
    info = run_info(bundle)
    try:
        no_loss(info)
        assert all(account["closes"] for account in info["account"].values()), info["account"]
    except AssertionError as e:
        raise AssertionError(f"{e}\n{evidence(bundle)}") from None
    # each agent ran two of the workers, in turn: worker i on agent i mod 8
    assert [w["address"] for w in info["workers"]] == [addresses[i % AGENTS] for i in range(AGENTS * SLOTS)]
    intervals = table(bundle, "intervals")
    clients = intervals.groupby("role")["client_id"].nunique().to_dict()
    assert clients == {"producer": PRODUCERS, "share_consumer": CONSUMERS}, clients
    assert sorted(intervals["worker"].unique()) == list(range(AGENTS * SLOTS))
    # each agent sent its two workers' reports of a second as one (protocol 20), when both came within
    # the agent's hold: the coordinator took in fewer reports than the workers made
    cost, lines = info["coordinator"], len(table(bundle, "workers"))
    assert cost["report_lines"] == lines and cost["report_lag_ms"]["count"] < lines, (cost, lines)
    [recorded] = modifications(bundle)
    assert recorded["key"] == "producerRate", recorded
    for index in range(AGENTS * SLOTS):  # every worker's log came back from its agent
        assert (bundle / "logs" / f"worker-{index}.log").is_file(), index
    # the status after the change said what the bundle says: the new target, each producer's share of
    # it in every report after the change, and no more records than the reports up to then held
    producing = intervals[intervals["role"] == "producer"]
    changed = producing[(producing["end_time"] > recorded["time"] + 2) & (producing["end_time"] <= asked_at)]
    assert after["targetRate"] == 960 and after["producers"] == PRODUCERS, after
    assert len(changed) >= PRODUCERS and set(changed["target_rate"]) == {960 / PRODUCERS}, changed["target_rate"]
    reported = intervals[intervals["end_time"] <= asked_at + 1]
    assert 0 < after["sent"] <= reported["sent"].sum() and 0 < after["received"] <= reported["received"].sum()
    # the console's last words are the bundle's totals
    totals = info["totals"]
    said = re.search(r"sent ([\d,]+) \(acked ([\d,]+)\), received ([\d,]+), lost 0", console_log("fleet").read_text())
    assert said is not None
    assert [int(n.replace(",", "")) for n in said.groups()] == [totals["sent"], totals["acked"], totals["received"]]
