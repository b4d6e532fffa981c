"""Shared fixtures: an isolated project and state folder for every test session, the CLI as a
subprocess, and the guarantee that no Kafka process of ours outlives the suite.

The session runs on a scratch copy of run/ whose environment profiles listen on ports found free
when the suite starts, in a block no shipped profile uses: a user's clusters of the shipped
profiles (local, localBeefy) may run beside the suite and are never touched."""

import contextlib
import os
import random
import re
import shutil
import socket
import tempfile
from pathlib import Path

import psutil
import pytest
import yaml

from dimster.coordinator.control.run_state import read_run_state
from dimster.kafka.helper import stop_helpers
from dimster.pipeline.spark_service import SparkService
from tests import locks
from tests.cli import REPO, CliResult, copy_project, dimster  # noqa: F401  (the tests import them from here)
from tests.clusters import RUNNING, beefy, beefy_down, beefy_project, local_cluster  # noqa: F401  (fixtures)
from tests.containers import dimster_images, podman_service  # noqa: F401  (session fixtures)
from tests.kinds import pytest_collection_finish, pytest_deselected  # noqa: F401  (hooks)
from tests.netns import forwarded_ports, unused_subnet
from tests.times import (  # noqa: F401  (each test's wall and CPU seconds: hooks)
    pytest_configure,
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_sessionfinish,
    pytest_testnodedown,
)

# hypothesis keeps its caches in a scratch folder, not in the repository
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "dimster-tests-hypothesis"))
SHIPPED_ENVIRONMENTS = REPO / "run" / "environments"

# Test ports come in slots of SLOT ports: brokers on the slot's first ten, controllers on the next ten,
# the brokers' metrics (JMX exporter) on the last ten (a profile has at most 9 nodes). The scratch
# copies of the shipped profiles take the first slots in name order; tests that write their own
# profile take a spare slot (`spare_ports`), each for one use: 1 the clusters a test starts and ends
# itself, 2 the agents' ports, 3 the distributed tests' cluster, 4 the Prometheus of `dimster
# monitor`, 5 the docker backend's cluster.
SLOT = 30
SLOTS = 12  # the shipped profiles (6) and the spare slots tests take (up to 5), with room
SEARCH = range(20000, 32000, SLOT * SLOTS)  # below Linux's ephemeral range, which outgoing connections use


# The suite's clusters tell share consumers to heartbeat every 250 ms instead of Kafka's 5 s: a share
# group's assignment follows a member's join by a heartbeat interval or two, and every share run starts so.
# A consumer group's first rebalance waits half a second for more members, not Kafka's 3 s: a run's
# consumers join within it, so the group forms once with all of them (at once, it formed with the first
# member and rebalanced as each other one joined, which the members learn at their next heartbeat, up
# to 3 s later). Share groups may take locks of one second (the share-feature tests make records
# outlast their locks). Internal topics have 4 partitions instead of 50 each: a broker
# that starts or restarts loads and catches up every partition it holds. The controller writes its
# no-op record to the metadata log every 5 s, not every 0.5 s: an idle broker costs 1.5 % of a core
# instead of 2.5 % (0.93 against 1.50 CPU-s over 60 s idle, measured), and none of the suite's clusters
# waits on that record (fencing follows the brokers' heartbeats).
TEST_BROKER_CONFIG = (
    "group.share.min.heartbeat.interval.ms: 250\ngroup.share.heartbeat.interval.ms: 250\n"
    "group.initial.rebalance.delay.ms: 500\ngroup.share.min.record.lock.duration.ms: 1000\n"
    "offsets.topic.num.partitions: 4\nshare.coordinator.state.topic.num.partitions: 4\n"
    "metadata.max.idle.interval.ms: 5000\n"
)

# The suite's brokers compile with C1 only: a broker's start costs about half the CPU (15 s of CPU to
# start and idle 30 s, 9 s so) and the suite's rates are far below where C2's code would matter.
SUITE_JVM = "jvmOptions: [-XX:TieredStopAtLevel=1]\n"
CLIENT_JVM = "-XX:TieredStopAtLevel=1"  # the same for the workers' Java clients (clients/jvm.py)


# Test modules that share a cluster or daemon of the session, and so run on one worker of a parallel
# session (scripts/test.sh's kafka tier): the three-node cluster, and podman with dimster's images.
SHARED_BY_MODULES = {
    "test_cluster_three_nodes.py": "beefy",
    "test_external_cluster.py": "beefy",
    "test_docker_backend.py": "podman",
    "test_images.py": "podman",
    "test_k8s_pods.py": "podman",
    "test_secure.py": "podman",  # its agent container
}


# Tests that take their scope's cluster down themselves: run last of their scope, or the next test of
# the scope brings it up again (5-13 s) only for the session's end to take it down once more.
ENDS_ITS_CLUSTER = (
    "test_cluster_three_nodes.py::test_down_leaves_nothing_running",
    "test_docker_backend.py::test_down_removes_exactly_what_dimster_created_and_purge_the_volumes",
)


def _scope(nodeid: str) -> str:
    """Where a test runs with others: its module's shared scope (SHARED_BY_MODULES), else its module."""
    module = nodeid.split("::", 1)[0]
    return SHARED_BY_MODULES.get(Path(module).name, module)


def pytest_collection_modifyitems(items):
    """pytest-randomly's order (its hook runs first), but for each test of ENDS_ITS_CLUSTER: its module
    after the other modules of its scope, and it last of its module."""
    for tail in ENDS_ITS_CLUSTER:
        ender = next((item for item in items if item.nodeid.endswith(tail)), None)
        if ender is None:
            continue
        module = ender.nodeid.split("::", 1)[0] + "::"
        block = [item for item in items if item.nodeid.startswith(module) and item is not ender] + [ender]
        rest = [item for item in items if not item.nodeid.startswith(module)]
        scope = _scope(ender.nodeid)
        at = max((i + 1 for i, item in enumerate(rest) if _scope(item.nodeid) == scope), default=len(rest))
        items[:] = rest[:at] + block + rest[at:]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of the modules that share the three-node cluster, that cluster goes down
    (the modules of a scope run one after the other on one worker)."""
    if _scope(item.nodeid) == "beefy" and (nextitem is None or _scope(nextitem.nodeid) != "beefy"):
        for cluster in RUNNING:
            beefy_down(cluster)


def pytest_xdist_make_scheduler(config, log):
    """With pytest-xdist (`-n 3`), a test module runs whole on one worker, so that its module-wide
    clusters start once; the modules of SHARED_BY_MODULES run on one worker together."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return ModuleScheduling(config, log)


def one_error_line(result, *fragments: str, code: int | None = 2) -> str:
    """The one line stderr holds: `dimster: error: ...` with every fragment, and the exit code (any
    but 0 when `code` is None)."""
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dimster: error:"), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.code != 0 if code is None else result.code == code, result.stderr
    return lines[0]


def files_holding(folder: Path, values: list[str], pattern: str = "*") -> list[str]:
    """`path: value` for every file under `folder` matching `pattern` that holds one of `values`.

    A running broker deletes segment folders while the walk goes on; what vanished holds nothing."""
    found = []
    for parent, _, names in os.walk(folder):  # os.walk passes over folders that vanish
        for path in (Path(parent) / name for name in names if Path(name).match(pattern)):
            if not path.is_file():  # a socket (the Kafka helper's), a pipe: no file to hold a value
                continue
            try:
                data = path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                continue
            found += [f"{path}: {value}" for value in values if value.encode() in data]
    return found


def our_java_processes(state_dir: Path) -> list[psutil.Process]:
    """Running java processes whose command line points into this session's state folder (one that
    has exited but is not reaped yet, a zombie, is not running)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        running = process.info["status"] != psutil.STATUS_ZOMBIE
        if running and "java" in (process.info["name"] or "") and str(state_dir) in cmdline:
            found.append(process)
    return found


def shipped_ports() -> set[int]:
    """Every broker, controller and broker-metrics port a shipped environment profile uses."""
    ports = set()
    for path in SHIPPED_ENVIRONMENTS.glob("*.yaml"):
        profile = yaml.safe_load(path.read_text()) or {}
        nodes = profile.get("nodes", 1)
        controllers = profile.get("controllerPortBase", 19192)
        bases = (
            profile.get("brokerPortBase", 19092),
            controllers,
            profile.get("brokerMetricsPortBase", controllers + 10),
        )
        for base in bases:
            ports.update(range(base, base + nodes))
    return ports


def unused_port() -> int:
    """A loopback port nothing listens on (free now: the kernel just gave it out)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def busy_port():
    """A loopback port something listens on while the block lasts."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def claimed(start: int) -> bool:
    """Claim a port block for this session: two sessions at once never share one."""
    return locks.hold(Path(tempfile.gettempdir()) / f"dimster-test-ports-{start}.lock")


def free_port_block() -> int:
    """The first port of a block of SLOT * SLOTS ports, each free now, none used by a shipped profile and
    no other session's and none the host's firewall forwards to a container. Blocks are tried in random
    order."""
    taken = shipped_ports() | forwarded_ports()
    for start in random.sample(SEARCH, len(SEARCH)):
        block = range(start, start + SLOT * SLOTS)
        if not taken.intersection(block) and all(port_is_free(p) for p in block) and claimed(start):
            return start
    raise RuntimeError(f"no free block of {SLOT * SLOTS} loopback ports between {SEARCH.start} and {SEARCH.stop}")


def profile_ports(first_port: int, slot: int) -> dict[str, int]:
    start = first_port + slot * SLOT
    return {"brokerPortBase": start, "controllerPortBase": start + 10, "brokerMetricsPortBase": start + 20}


def with_ports(text: str, ports: dict[str, int]) -> str:
    """A profile's text with its port keys set to `ports` (comments and everything else kept)."""
    for key, port in ports.items():
        text, found = re.subn(rf"^({key}:\s*)\d+", rf"\g<1>{port}", text, flags=re.MULTILINE)
        if not found:
            text = text.rstrip("\n") + f"\n{key}: {port}\n"
    return text


def without_data_dir(text: str) -> str:
    """A profile's text without `dataDir`: its clusters keep their data in the state folder."""
    return re.sub(r"^dataDir:.*\n?", "", text, flags=re.MULTILINE)


@pytest.fixture(scope="session", autouse=True)
def scratch_project(tmp_path_factory) -> Path:
    """This session's project: a copy of run/ whose local profiles listen on ports of a free block.
    DIMSTER_PROJECT_DIR points at it for the whole session."""
    first_port = free_port_block()
    project = tmp_path_factory.mktemp("dimster-project")
    shutil.copytree(REPO / "run", project / "run")
    with (project / "run" / "broker-configs" / "default.yaml").open("a") as config:
        config.write(TEST_BROKER_CONFIG)
    profiles = sorted((project / "run" / "environments").glob("*.yaml"))
    assert len(profiles) < SLOTS, "more shipped profiles than port slots"
    for slot, path in enumerate(profiles):
        text = without_data_dir(path.read_text())
        backend = (yaml.safe_load(text) or {}).get("backend", "local")
        ports = profile_ports(first_port, slot)
        if backend == "docker":  # its controllers listen inside the cluster's network only
            ports.pop("controllerPortBase")
        if backend != "external":
            text = with_ports(text, ports).rstrip("\n") + f"\n{SUITE_JVM}"
        if "nodeNetwork" in text:  # never the shipped subnet, which a user's cluster may hold
            text = re.sub(r"(?m)^nodeNetwork:.*$", f"nodeNetwork: {unused_subnet(skip=1)}", text)
        path.write_text(text)
    os.environ["DIMSTER_PROJECT_DIR"] = str(project)
    os.environ["DIMSTER_TEST_FIRST_PORT"] = str(first_port)
    os.environ.setdefault("DIMSTER_CLIENT_JVM_OPTS", CLIENT_JVM)
    return project


def spare_ports(number: int = 1, backend: str = "local") -> dict[str, int]:
    """The port keys for a profile a test writes itself (`number` 1 or 2 of the session's spare
    slots: free when the suite started, used by nothing of the session else). A docker profile has
    no controller port on the host."""
    spare = len(list(SHIPPED_ENVIRONMENTS.glob("*.yaml"))) + number - 1
    assert number >= 1 and spare < SLOTS, f"no spare port slot {number}"
    ports = profile_ports(int(os.environ["DIMSTER_TEST_FIRST_PORT"]), spare)
    if backend == "docker":
        ports.pop("controllerPortBase")
    return ports


def spare_ports_yaml(number: int = 1, backend: str = "local") -> str:
    return "".join(f"{key}: {port}\n" for key, port in spare_ports(number, backend).items())


@pytest.fixture(scope="session", autouse=True)
def state_dir(tmp_path_factory, scratch_project) -> Path:
    """Cluster data and process ids of this test session live in a fresh folder; at the end no
    java process started from it may be left."""
    path = tmp_path_factory.mktemp("dimster-state")
    os.environ["DIMSTER_STATE_DIR"] = str(path)
    yield path
    stop_helpers()
    SparkService().stop()
    leftovers = our_java_processes(path)
    for process in leftovers:
        process.kill()
    assert not leftovers, f"java processes left running after the suite: {[p.pid for p in leftovers]}"


@pytest.fixture(scope="session", autouse=True)
def local_cluster_down_at_the_end(state_dir):
    """Runs bring the session's `local` up and leave it for the next run, as users want: the Kafka
    modules share one warm broker, and it goes down once, when the session ends (after the last
    module's no_run_left_on_local)."""
    yield
    assert dimster("cluster", "down", "local").code == 0


@pytest.fixture(scope="session")
def spark() -> str:
    """Where a test's summaries run: dimster's warm Spark server of this session's state folder (started
    by the first summary, ended with the session), as every `dimster run` of the session uses it."""
    from dimster.pipeline.spark_service import EMBEDDED

    return EMBEDDED


@pytest.fixture(scope="module", autouse=True)
def no_run_left_on_local():
    """A module that leaves a run going on `local` stops it, so that the next module finds it idle."""
    yield
    if read_run_state("local") is not None:
        dimster("stop", "local")


@pytest.fixture
def project(tmp_path, scratch_project) -> Path:
    """A copy of the session's scratch project that a test may edit; point DIMSTER_PROJECT_DIR at it."""
    return copy_project(scratch_project, tmp_path)


def write_environment(project: Path, name: str, text: str) -> None:
    """A profile of the test's own; a cluster dimster runs gets the suite's JVM options (SUITE_JVM)."""
    if "backend: external" not in text and "jvmOptions" not in text:
        text = text.rstrip("\n") + f"\n{SUITE_JVM}"
    (project / "run" / "environments" / f"{name}.yaml").write_text(text)


def set_broker_config(project: Path, key: str, value: object) -> None:
    """Set `key` in the project's broker config (run/broker-configs/default.yaml), for a redeploy."""
    path = project / "run" / "broker-configs" / "default.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), key: value}))
