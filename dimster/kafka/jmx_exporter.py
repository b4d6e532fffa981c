"""The Prometheus JMX exporter Java agent that `local` brokers start with: the published jar from
Maven Central, version pinned, cached like the Kafka jars, and dimster's rules file (which MBeans
become which Prometheus series)."""

import shutil
import subprocess
from importlib import resources
from pathlib import Path

from dimster.errors import DimsterError
from dimster.kafka.distribution import MVN_HINT, last_error_line
from dimster.paths import cache_dir

VERSION = "1.0.1"
ARTIFACT = f"io.prometheus.jmx:jmx_prometheus_javaagent:{VERSION}"


def agent_jar_path() -> Path:
    return cache_dir() / "jmx-exporter" / VERSION / f"jmx_prometheus_javaagent-{VERSION}.jar"


def rules_file() -> Path:
    return Path(str(resources.files("dimster.kafka") / "jmx-exporter.yaml"))


def agent_jar() -> Path:
    """The agent's jar, fetched with mvn into the cache when missing."""
    jar = agent_jar_path()
    if jar.exists():
        return jar
    if not shutil.which("mvn"):
        raise DimsterError(f"mvn not found, needed to fetch the JMX exporter agent from Maven Central: {MVN_HINT}")
    jar.parent.mkdir(parents=True, exist_ok=True)
    log = jar.with_name("fetch.log")
    partial = jar.with_name("partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = ["mvn", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={partial}"]
    with open(log, "w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=jar.parent).returncode
    fetched = partial / jar.name
    if code != 0 or not fetched.exists():
        reason = last_error_line(log.read_text(errors="replace")) if code else f"mvn left no {jar.name}"
        raise DimsterError(f"could not fetch {ARTIFACT} from Maven Central: {reason} (log: {log})")
    fetched.rename(jar)
    shutil.rmtree(partial, ignore_errors=True)
    return jar


def agent_option(jar: Path, host: str, port: int) -> str:
    """The JVM option that starts the agent serving /metrics on host:port."""
    return f"-javaagent:{jar}={host}:{port}:{rules_file()}"
