"""Bad input gives one clear error line and a non-zero exit, never a traceback."""

import os
from pathlib import Path

import pytest

from tests.conftest import (
    busy_port,
    dimster,
    one_error_line,
    spare_ports,
    spare_ports_yaml,
    unused_port,
    write_environment,
)


@pytest.mark.unit
def test_unknown_environment_lists_known_ones():
    result = dimster("cluster", "status", "nosuchenv")
    one_error_line(result, "unknown environment 'nosuchenv'", "local", "localBeefy", code=2)


@pytest.mark.unit
def test_environment_yaml_syntax_error_names_file_and_line(project):
    write_environment(project, "broken", "nodes: 1\nheap: [1g\n")
    result = dimster("cluster", "up", "broken", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/environments/broken.yaml:3", "YAML syntax error", code=2)


@pytest.mark.unit
def test_environment_bad_value_names_key_and_value(project):
    write_environment(project, "zero", "nodes: 0\n")
    result = dimster("cluster", "up", "zero", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/environments/zero.yaml", "'nodes'", "greater than or equal to 1", "got 0", code=2)


@pytest.mark.unit
def test_environment_unknown_key_suggests_closest(project):
    write_environment(project, "typo", "node: 3\n")
    result = dimster("cluster", "up", "typo", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "unknown key 'node'", "did you mean 'nodes'", code=2)


@pytest.mark.unit
def test_kafka_version_below_4_2_is_refused(project):
    write_environment(project, "old", "kafkaVersion: 3.9.0\n")
    result = dimster("cluster", "up", "old", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "'kafkaVersion'", "4.2.0 or newer", "3.9.0", code=2)


@pytest.mark.unit
def test_broker_config_yaml_syntax_error(project):
    (project / "run/broker-configs/default.yaml").write_text("num.partitions: 1\n  bad: : indent\n")
    result = dimster("cluster", "up", "local", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/broker-configs/default.yaml:2", "YAML syntax error", code=2)


@pytest.mark.unit
def test_unknown_broker_property_uses_kafkas_definitions(project):
    (project / "run/broker-configs/default.yaml").write_text("group.share.partition.max.record.lock: 4000\n")
    result = dimster("cluster", "up", "local", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(
        result,
        "unknown broker property 'group.share.partition.max.record.lock'",
        "did you mean 'group.share.partition.max.record.locks'",
        code=2,
    )


@pytest.mark.unit
def test_invalid_broker_value_is_rejected_by_kafka_itself(project):
    (project / "run/broker-configs/default.yaml").write_text("group.share.partition.max.record.locks: 5\n")
    result = dimster("cluster", "up", "local", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "invalid broker config", "group.share.partition.max.record.locks", "5", code=2)


@pytest.mark.unit
def test_managed_broker_property_is_refused(project):
    (project / "run/broker-configs/default.yaml").write_text("listeners: PLAINTEXT://0.0.0.0:9092\n")
    result = dimster("cluster", "up", "local", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "'listeners' is set by dimster", code=2)


@pytest.mark.unit
def test_port_in_use(project):
    with busy_port() as port:
        write_environment(project, "busy", f"brokerPortBase: {port}\ncontrollerPortBase: {port + 1}\n")
        result = dimster("cluster", "up", "busy", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, f"port {port}", "in use", "brokerPortBase", code=3)


@pytest.mark.unit
def test_broker_metrics_port_in_use(project):
    ports = spare_ports()
    with busy_port() as port:
        profile = f"brokerPortBase: {ports['brokerPortBase']}\ncontrollerPortBase: {ports['controllerPortBase']}\n"
        write_environment(project, "busy", profile + f"brokerMetricsPortBase: {port}\n")
        result = dimster("cluster", "up", "busy", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, f"port {port}", "metrics listener", "brokerMetricsPortBase", code=3)


@pytest.mark.kafka
def test_broker_that_fails_to_start_shows_its_log(project, state_dir):
    # A heap the JVM refuses: the node exits at once, and its own words are shown.
    write_environment(project, "tiny", "heap: 1m\n" + spare_ports_yaml())
    result = dimster("cluster", "up", "tiny", env={"DIMSTER_PROJECT_DIR": str(project)})
    [line] = result.error_lines  # then the broker's own words, below it
    assert result.code == 3 and "node 1 of 'tiny' exited during start-up" in line, result.stderr
    assert "heap" in result.stderr.split(line)[1].lower() and "Traceback" not in result.stderr
    assert dimster("cluster", "status", "tiny", env={"DIMSTER_PROJECT_DIR": str(project)}).code == 1


def _bin_with(tmp_path: Path, *tools: str) -> str:
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        target = Path(os.path.realpath(__import__("shutil").which(tool)))
        (folder / tool).symlink_to(target)
    return str(folder)


@pytest.mark.unit
def test_missing_java_says_what_to_install(tmp_path):
    env = {"PATH": _bin_with(tmp_path), "JAVA_HOME": "", "DIMSTER_CACHE_DIR": str(tmp_path / "cache")}
    result = dimster("kafka", "fetch", "--version", "4.3.1", env=env)
    one_error_line(result, "java not found", "JDK 17", code=2)


@pytest.mark.unit
def test_missing_maven_says_what_to_install(tmp_path):
    env = {"PATH": _bin_with(tmp_path, "java"), "JAVA_HOME": "", "DIMSTER_CACHE_DIR": str(tmp_path / "cache")}
    result = dimster("kafka", "fetch", "--version", "4.3.1", env=env)
    one_error_line(result, "mvn not found", "Maven", code=2)


@pytest.mark.unit
@pytest.mark.parametrize("command", [["cluster", "logs", "local", "--node", "7"]])
def test_no_such_node(command):
    one_error_line(dimster(*command), "no node 7", code=2)


@pytest.mark.unit
def test_unreachable_external_cluster_fails_fast(project, tmp_path):
    free_port = unused_port()
    write_environment(project, "gone", f"backend: external\nbootstrapServers: 127.0.0.1:{free_port}\n")
    workload = tmp_path / "w.yaml"
    workload.write_text("name: unreachable\ndurationSeconds: 5\n")
    result = dimster(
        "run", "gone", "-w", str(workload), "--results", str(tmp_path / "r"), env={"DIMSTER_PROJECT_DIR": str(project)}
    )
    one_error_line(
        result, f"cluster at 127.0.0.1:{free_port} is unreachable", "refused the connection", "bootstrapServers", code=3
    )


@pytest.mark.unit
def test_external_environment_needs_bootstrap_servers(project):
    write_environment(project, "ext", "backend: external\n")
    result = dimster("cluster", "status", "ext", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/environments/ext.yaml", "needs bootstrapServers", code=2)
