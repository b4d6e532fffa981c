"""`clientVersion`: a role's Java clients of another kafka-clients version than the cluster's, fetched
from Maven Central like the brokers. What a version cannot do is refused with one line; a run with two
versions puts each on workers of its own; and the old clients really run against the 4.3 cluster."""

import re

import pytest
import yaml

from dimster.clients.properties import check_client_configs, java_versions
from dimster.coordinator.live.changes import live_changes
from dimster.coordinator.workers.topology import build_topology, place, pools, worker_versions
from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.errors import DimsterError
from dimster.workload.model import parse_workload
from tests.conftest import dimster
from tests.runs import BASE, only_bundle, run_info, summarized, table, wait, write_workload

CLUSTER = DEFAULT_KAFKA_VERSION
GROUPS = {"consumerType": "CONSUMER_GROUP", "clientLibrary": "java"}


def workload(**keys):
    return parse_workload({"name": "versions", **BASE, **keys}, "w.yaml")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("keys", "line"),
    [
        (
            {"clientVersion": {"consumer": "2.4.0"}, "consumerType": "CONSUMER_GROUP"},
            "needs clientLibrary.consumer: java",
        ),
        ({**GROUPS, "clientVersion": {"consumer": "2.1.1"}}, "2.1.1 is too old: dimster's Java drivers use"),
        ({**GROUPS, "clientVersion": {"consumer": "2.2.2"}, "staticMembership": True}, "so 2.3.0 or newer"),
        ({"clientLibrary": "java", "clientVersion": "4.2.0"}, "clientVersion.shareConsumer 4.2.0 is too old"),
        ({**GROUPS, "clientVersion": {"consumer": "2.4"}}, "clientVersion.consumer"),
    ],
)
def test_a_client_version_the_run_cannot_use_is_one_line(keys, line):
    with pytest.raises(DimsterError) as refused:
        workload(**keys)
    message = str(refused.value)
    assert line in message and "\n" not in message and message.startswith("w.yaml")


@pytest.mark.unit
def test_a_version_short_form_and_roles_the_run_does_not_have():
    both = workload(**GROUPS, clientVersion="2.4.0")  # the share consumer's 2.4.0 is not this run's
    assert java_versions(both, CLUSTER) == {"producer": "2.4.0", "consumer": "2.4.0"}
    librdkafka_producers = workload(
        consumerType="CONSUMER_GROUP", clientLibrary={"consumer": "java"}, clientVersion={"consumer": "2.3.1"}
    )
    assert java_versions(librdkafka_producers, CLUSTER) == {"consumer": "2.3.1"}


@pytest.mark.unit
def test_two_versions_go_on_workers_of_their_own():
    w = workload(**GROUPS, producersPerTopic=3, consumersPerGroup=5, clientVersion={"consumer": "2.4.0"})
    versions = java_versions(w, CLUSTER)
    per_worker = worker_versions(versions, 4, CLUSTER)
    assert per_worker == ["2.4.0", CLUSTER, "2.4.0", CLUSTER]
    topology = build_topology(w, "t")
    placement = place(topology, 4, pools(versions, per_worker))
    consumers = [placement[f"c{c.consumer_id}"] for c in topology.consumers]
    producers = [placement[f"p{p.producer_id}"] for p in topology.producers]
    assert consumers == [0, 2, 0, 2, 0] and producers == [1, 3, 1]
    with pytest.raises(DimsterError, match=rf"need 2 kafka-clients versions \(consumer 2.4.0, producer {CLUSTER}\)"):
        worker_versions(versions, 1, CLUSTER)


@pytest.mark.unit
def test_one_version_deals_clients_over_every_worker_as_before():
    w = workload(**GROUPS, producersPerTopic=1, consumersPerGroup=1, clientVersion="2.4.0")
    versions = java_versions(w, CLUSTER)
    per_worker = worker_versions(versions, 2, CLUSTER)
    assert per_worker == ["2.4.0", "2.4.0"]
    assert place(build_topology(w, "t"), 2, pools(versions, per_worker)) == {"p0": 0, "c0": 1}


@pytest.mark.unit
def test_client_version_cannot_change_live():
    old = workload(**GROUPS).to_yaml_dict()
    new = workload(**GROUPS, clientVersion={"consumer": "2.4.0"}).to_yaml_dict()
    with pytest.raises(ValueError, match="one kafka-clients version when the run starts"):
        live_changes(old, new)


@pytest.mark.unit
def test_properties_are_judged_by_the_roles_own_client_version():
    """kafka-clients 2.3.1 (fetched) has no group.protocol (KIP-848 came in 3.7); 4.3.1 has it."""
    config = {"kafkaConfig": {"consumerConfig": {"group.protocol": "consumer"}}}
    check_client_configs(workload(**GROUPS, **config), "w.yaml", CLUSTER)
    old = workload(**GROUPS, **config, clientVersion={"consumer": "2.3.1"})
    with pytest.raises(DimsterError, match=r"^w.yaml: kafkaConfig.consumerConfig: 'group.protocol' is not a property"):
        check_client_configs(old, "w.yaml", CLUSTER)


@pytest.mark.unit
def test_a_common_name_one_versions_clients_know_is_accepted_and_one_none_knows_is_not():
    """enable.metrics.push (KIP-714, 3.7) is a property of the 4.3.1 producer, not of the 2.3.1 consumer."""
    mixed = {**GROUPS, "clientVersion": {"consumer": "2.3.1"}}
    check_client_configs(workload(**mixed, kafkaConfig={"commonConfig": {"enable.metrics.push": False}}), "w", CLUSTER)
    with pytest.raises(DimsterError, match=r"^w: kafkaConfig.commonConfig: 'no.such.name' is not a property"):
        check_client_configs(workload(**mixed, kafkaConfig={"commonConfig": {"no.such.name": 1}}), "w", CLUSTER)


@pytest.mark.unit
def test_a_role_without_clients_keeps_the_clusters_version():
    """No share consumers here: the short form's 2.4.0 is the producers' alone (2.4.0 has no share consumer)."""
    w = workload(clientLibrary="java", clientVersion="2.4.0", consumersPerGroup=0)
    assert java_versions(w, CLUSTER) == {"producer": "2.4.0"}
    check_client_configs(w, "w.yaml", CLUSTER)


@pytest.mark.unit
def test_a_version_maven_central_does_not_have_is_one_line():
    with pytest.raises(DimsterError) as refused:
        check_client_configs(workload(**GROUPS, clientVersion={"consumer": "2.3.99"}), "w.yaml", CLUSTER)
    message = str(refused.value)
    assert re.match(r"could not fetch kafka-clients 2.3.99 from Maven Central: .*2.3.99", message)
    assert "\n" not in message and "Traceback" not in message


@pytest.mark.kafka
def test_a_2_3_consumer_group_and_4_3_producers_in_one_run_on_two_workers(tmp_path, project, spark):
    """The consumers run kafka-clients 2.3.1 in one worker's JVM, the producers the cluster's 4.3.1 in
    the other's; every record produced is consumed once, by the old clients. An all-Java consumer
    group: both fill the statistics columns, and the summary's ratios come from their metrics alone."""
    path = write_workload(tmp_path, "versions", **GROUPS, clientVersion={"consumer": "2.3.1"}, durationSeconds=0)
    env = {"DIMSTER_PROJECT_DIR": str(project), "DIMSTER_CLIENT_JVM_OPTS": "-Ddimster.client.log.level=INFO"}
    results = tmp_path / "results"
    command = ["run", "local", "-w", str(path), "--results", str(results), "--no-summary", "--workers", "2"]
    started = dimster(*command, "--detach", env=env)
    assert started.code == 0, started.stderr + started.stdout
    try:  # 12 s of load: the Java clients report their statistics every 5 s, twice in the measured phase
        wait("received>=3000 and elapsedSeconds>=12")
    finally:
        dimster("stop", "local")
    bundle = only_bundle(results)
    info = run_info(bundle)
    assert yaml.safe_load((bundle / "environment.yaml").read_text())["workers"] == 2  # local.yaml says 1
    assert info["versions"]["java_clients"] == {"producer": CLUSTER, "consumer": "2.3.1"}
    assert yaml.safe_load((bundle / "workload.yaml").read_text())["clientVersion"]["consumer"] == "2.3.1"
    totals = info["totals"]
    assert totals["received"] == totals["sent"] > 1_000 and totals["lost"] == totals["duplicates"] == 0
    stats = table(bundle, "client_stats")
    producers, consumers = stats[stats.role == "producer"], stats[stats.role == "consumer"]
    assert producers.tx_msgs.max() > 0 and producers.batch_records_avg.max() > 0
    assert consumers.rx_bytes.max() > 0 and consumers.requests_fetch.max() > 0
    intervals = table(bundle, "intervals")
    workers = intervals.groupby("role").worker.unique()
    [consumer_worker], [producer_worker] = workers["consumer"], workers["producer"]
    assert consumer_worker != producer_worker
    logs = {w: (bundle / "logs" / f"worker-{w}.java.log").read_text() for w in (consumer_worker, producer_worker)}
    assert "Kafka version: 2.3.1" in logs[consumer_worker] and CLUSTER not in logs[consumer_worker]
    assert f"Kafka version: {CLUSTER}" in logs[producer_worker] and "2.3.1" not in logs[producer_worker]
    summary = summarized(bundle, spark)
    assert f"producer {CLUSTER}, consumer 2.3.1" in (bundle / "report.html").read_text()  # the Clients panel
    ratios = summary["client_stats"]
    assert ratios["producer_batch_records_avg"] >= 1 and ratios["consumer_fetch_requests"] > 0
    assert ratios["records_per_fetch"] > 0 and ratios["rx_bytes_per_consumed_byte"] > 0
    for worker in (consumer_worker, producer_worker):
        assert "Traceback" not in (bundle / "logs" / f"worker-{worker}.log").read_text()
    # the Java producers' own queue time and request latency, in ms: within their records' publish latency
    publish_max = summary["latency_ms"]["publish"]["max"]
    assert 0 < ratios["producer_queue_time_ms_avg"] <= publish_max
    assert 0 < ratios["producer_request_latency_ms_avg"] <= publish_max
