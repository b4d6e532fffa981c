"""Kafka's Java clients inside this Python process, through JPype: one JVM per process, started on
first use with the jars of one Kafka version (the cluster's, or a role's clientVersion) and dimster's
Java classes."""

import faulthandler
import os
import shlex
import sys
import threading
from importlib import resources
from pathlib import Path

from dimster.errors import DimsterError
from dimster.kafka.class_sharing import shared_classes
from dimster.kafka.distribution import java_clients, java_executable, kafka_distribution

# What kafka-run-class.sh gives Kafka's own clients and perf tools, and a heap for many clients.
# DIMSTER_CLIENT_JVM_OPTS is appended (a later JVM option wins). -Xrs leaves SIGINT/SIGTERM to Python.
# -XX:+DisableExplicitGC where the tools have ExplicitGCInvokesConcurrent: JPype ends a Python
# collection with System.gc() whenever the process's heap grew, and the Python thread that collected
# (a pacing thread, a consumer's) waited out a whole G1 cycle, 17-56 ms; the clients never ask for one.
JVM_OPTIONS = (
    "-Xrs",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+DisableExplicitGC",
    "-Djava.awt.headless=true",
)

_lock = threading.Lock()
_started_version: str | None = None


def libjvm_path() -> str:
    """The libjvm of the `java` dimster runs brokers with (JAVA_HOME, else the one on PATH)."""
    home = Path(java_executable()).resolve().parents[1]
    for candidate in (home / "lib" / "server" / "libjvm.so", home / "jre" / "lib" / "server" / "libjvm.so"):
        if candidate.exists():
            return str(candidate)
    raise DimsterError(f"no libjvm.so under {home}: the java clients need a full JDK 17+ (JAVA_HOME)")


def holds(clients_version: str) -> bool:
    """This process's JVM runs kafka-clients `clients_version`, or runs none yet (it could)."""
    return _started_version in (None, clients_version)


def running() -> bool:
    """This process runs a JVM of dimster's (Python's fault handler must then stay off: start_jvm)."""
    return _started_version is not None


def start_jvm(kafka_version: str, log_file: Path | None = None, clients_version: str = "") -> None:
    """Start this process's JVM with Kafka `kafka_version`'s jars (or kafka-clients `clients_version`
    alone, where it is another), once; client logs (WARN and up) go to `log_file`, or nowhere."""
    global _started_version
    import jpype

    clients_version = clients_version or kafka_version
    with _lock:
        if jpype.isJVMStarted():
            if _started_version != clients_version:
                raise DimsterError(
                    f"this process already runs the Java clients of Kafka {_started_version}, not {clients_version}"
                )
            return
        if clients_version == kafka_version:
            distribution = kafka_distribution(kafka_version)
        else:
            distribution = java_clients(clients_version)
        if log_file is None:
            logging = ["-Dlog4j2.level=OFF"]
        else:
            config = resources.files("dimster.clients") / "log4j2-clients.properties"
            logging = [f"-Dlog4j2.configurationFile={config}", f"-Ddimster.client.log={log_file}"]
        extra = shlex.split(os.environ.get("DIMSTER_CLIENT_JVM_OPTS", ""))
        own = (*JVM_OPTIONS, *logging, *extra)
        options = [*shared_classes(distribution, own), *own]
        classpath = distribution.class_path_entries
        # The JVM takes SIGSEGV for its own use (implicit null checks, safepoints): Python's fault
        # handler in front of it (coordinator/loop/failures.py) took one, logged the Python stacks and
        # raised it again, which the JVM then reported as a fatal error and aborted the process. Off
        # before the JVM installs its handlers (turned off after, it would put back the default ones).
        faulthandler.disable()
        try:
            jpype.startJVM(libjvm_path(), *options, classpath=classpath, interrupt=False, convertStrings=False)
        except (OSError, RuntimeError) as e:  # a bad DIMSTER_CLIENT_JVM_OPTS, a libjvm that will not load
            raise DimsterError(f"could not start the JVM for Kafka's Java clients ({' '.join(options)}): {e}") from None
        _started_version = clients_version


def detach_thread() -> None:
    """Let the JVM forget the calling thread (a client thread that is ending), if it knows it."""
    jpype = sys.modules.get("jpype")
    if jpype and jpype.isJVMStarted() and jpype.java.lang.Thread.isAttached():
        jpype.java.lang.Thread.detach()
