"""The JVM of the worker's Java clients, as dimster starts it (in this process)."""

import pytest

pytestmark = pytest.mark.unit


def test_a_request_to_collect_collects_nothing_so_no_python_thread_waits_for_a_java_collection():
    """JPype ends a Python collection with Java's System.gc() whenever the process's heap grew, on the
    thread that collected; the JVM used to run a whole G1 cycle for it while that thread (a producer's
    pacing, a consumer's accounting) waited 17-56 ms, the Java producer's publish-delay tail
    (docs/benchmarks.md). The clients' JVM now collects only when its heap needs it."""
    import jpype

    from dimster.clients.jvm import start_jvm
    from dimster.environment import DEFAULT_KAFKA_VERSION

    start_jvm(DEFAULT_KAFKA_VERSION)
    management = jpype.JClass("java.lang.management.ManagementFactory")

    def collections() -> dict[str, int]:
        return {str(bean.getName()): int(bean.getCollectionCount()) for bean in management.getGarbageCollectorMXBeans()}

    before = collections()
    for _ in range(3):
        jpype.JClass("java.lang.System").gc()
    assert collections() == before  # none of the three ran (each would have counted a pause)
