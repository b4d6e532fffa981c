"""A run through an `external` profile on a cluster whose broker ids do not start at 1: dimster takes
broker ids, count and replication from the cluster itself, not from the local layout. The cluster is
the session's warm three-node one (node ids 4-6); the profile names two of its brokers, not the first."""

import json
import time

import pytest

from dimster.kafka.admin import admin_client
from tests.conftest import dimster, write_environment
from tests.runs import run_info, run_until

pytestmark = pytest.mark.kafka


def topics_left(bootstrap: str, topics: list[str]) -> set[str]:
    """Which of `topics` the cluster still lists, waiting up to 15 s for deletions to show."""
    deadline = time.monotonic() + 15
    while True:
        left = set(topics) & set(admin_client(bootstrap).list_topics(timeout=10).topics)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def test_a_run_through_an_external_profile_on_brokers_4_to_6(beefy, tmp_path):
    bootstrap = ",".join(beefy.status()["bootstrap_servers"].split(",")[1:])  # not the first broker
    write_environment(beefy.project, "ext", f"backend: external\nbootstrapServers: {bootstrap}\n")
    external = dimster("cluster", "status", "ext", "--json", env=beefy.env)
    assert external.code == 0, external.stderr
    status = json.loads(external.stdout)
    assert status["backend"] == "external" and status["healthy"]
    assert [n["node_id"] for n in status["nodes"]] == [4, 5, 6]

    try:
        bundle = run_until(tmp_path, "external", "received>=1000", env="ext", cli_env=beefy.env, warmupSeconds=1)
    finally:
        dimster("stop", "ext", env=beefy.env)
    info = run_info(bundle)
    totals = info["totals"]
    assert totals["lost"] == 0 and totals["sent"] == totals["acked"] == totals["received"] > 0
    assert info["brokers"] == [4, 5, 6]
    assert info["topics"] and not topics_left(bootstrap, info["topics"])
