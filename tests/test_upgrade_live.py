"""A rolling upgrade on the real broker: a three-node `local` cluster (localBeefy's shape, an environment
of the test's own) goes from Kafka 4.3.1 to 4.4.0 with `dimster cluster upgrade --finalize`, run from a
second process while an acks=all share-group workload runs on it. Nothing acknowledged is lost, every
node runs 4.4.0, the feature levels are 4.4's but kraft.version (KAFKA-21426), and the run's events and
report show each step, node by node."""

import json
import re

import pytest

from dimster.cluster.local import LocalCluster
from dimster.cluster.upgrade import describe_features, release, version_mapping
from dimster.environment import load_environment
from dimster.kafka.distribution import kafka_distribution
from tests.conftest import dimster, spare_ports_yaml, write_environment
from tests.runs import events, run_info, start_detached, summarized, wait

pytestmark = pytest.mark.kafka

ENV, OLD, NEW = "upgrading", "4.3.1", "4.4.0"


def test_a_rolling_upgrade_under_an_acks_all_share_group_load_loses_nothing_and_the_report_shows_it(
    project, tmp_path, spark, monkeypatch
):
    profile = f"backend: local\nnodes: 3\nheap: 512m\nhost: 127.0.0.1\nkafkaVersion: {OLD}\nworkers: 1\n"
    write_environment(project, ENV, profile + spare_ports_yaml(1))
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    cli = {"DIMSTER_PROJECT_DIR": str(project)}
    cluster = LocalCluster(load_environment(ENV))
    tools = kafka_distribution(NEW, fetch=False)

    def received() -> int:
        result = dimster("status", ENV, "--json", env=cli)
        assert result.code == 0, result.stderr
        return json.loads(result.stdout)["received"]

    try:
        up = dimster("cluster", "up", ENV, env=cli)
        assert up.code == 0, up.stderr
        before = describe_features(cluster, tools)
        assert before["share.version"] == "1"
        bundle = start_detached(
            tmp_path, "upgrade", env=ENV, cli_env=cli,
            replicationFactor=3, producersPerTopic=1, producerRate=100, warmupSeconds=0, reportIntervalSeconds=2,
            kafkaConfig={"producerConfig": {"acks": "all", "linger.ms": 50}, "topicConfig": {"min.insync.replicas": 2}},
        )  # fmt: skip
        wait("received > 100 and consumed.rate > 0 msg/s", env=ENV, cli_env=cli)  # the thresholds' grammar

        upgrade = dimster("cluster", "upgrade", ENV, "--to", NEW, "--finalize", "--json", env=cli, timeout=900)
        assert upgrade.code == 0, upgrade.stderr
        report = json.loads(upgrade.stdout)
        assert report["upgraded_nodes"] == cluster.profile.node_ids == [1, 2, 3]
        wait(f"received>{received() + 400}", env=ENV, cli_env=cli)  # load goes on, on 4.4.0 with its features
        assert dimster("stop", ENV, env=cli).code == 0

        info = run_info(bundle)
        assert info["status"] == "completed", info.get("failure")
        assert info["totals"]["lost"] == 0 and info["totals"]["acked"] == info["totals"]["sent"] > 1000
        [account] = info["account"].values()
        assert account["closes"] and account["lost"] == 0 and account["acked"] == info["totals"]["acked"]
        # a node's restart leaves the acknowledgements in flight to it unanswered: each such record is in
        # doubt until delivered again, and stays so by name when the broker had committed it first
        settled = account["accepted"] + account["rejected"] + account["archived"]
        assert account["acked"] == settled + account["in_doubt"] and account["unconsumed"] == 0, account
        assert account["in_doubt"] <= info["totals"]["ack_errors"], info["totals"]

        for node_id, log in cluster.log_files().items():
            versions = re.findall(r"INFO Kafka version: (\S+) ", log.read_text())
            assert versions[0] == OLD and versions[-1] == NEW, (node_id, versions)
        status = json.loads(dimster("cluster", "status", ENV, "--json", env=cli).stdout)
        assert status["kafka_version"] == NEW and {n["kafka_version"] for n in status["nodes"]} == {NEW}
        assert f"kafkaVersion: {NEW}" in (project / "run" / "environments" / f"{ENV}.yaml").read_text()

        after = describe_features(cluster, tools)
        assert after == report["features_after"] and before == report["features_before"]
        assert after["share.version"] == "2" and after["kraft.version"] == before["kraft.version"]
        mv = version_mapping(tools, after["metadata.version"])["metadata.version"]
        assert mv == version_mapping(tools, release(NEW))["metadata.version"], after["metadata.version"]

        steps = [(e["event"], e.get("node")) for e in events(bundle) if e["event"].startswith("upgrade_")]
        per_node = [(f"upgrade_node_{step}", n) for n in (1, 2, 3) for step in ("stopped", "started", "in_sync")]
        expected = [("upgrade_started", None), *per_node, ("upgrade_features_finalized", None), ("upgrade_done", None)]
        assert steps == expected
        summarized(bundle, spark)
        html = (bundle / "report.html").read_text()
        for label in ("upgrade to Kafka 4.4.0 started", "node 2 stopped", "node 2 on Kafka 4.4.0", "node 3 in sync"):
            assert label in html, label
        assert f"features finalized (metadata.version={after['metadata.version']}, share.version=2" in html

        again = dimster("cluster", "upgrade", ENV, "--to", NEW, "--finalize", env=cli)  # finalizes only
        assert again.code == 0 and "no node needed upgrading" in again.stdout, again.stderr
        assert "feature levels already those of its release" in again.stdout
    finally:
        dimster("stop", ENV, env=cli)
        dimster("cluster", "down", ENV, "--purge", env=cli)
