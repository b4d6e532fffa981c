"""Simulated share-consumer crashes (`--set crashConsumers=N`, or scheduled with `consumerCrashes`):
which consumers crash, and when a scheduled crash is due. The crash itself happens in the worker
(ConsumerClient.crash); the coordinator then tells the group's consumers which records to watch for.
Also live restarts (`--set restartConsumers=N`): a consumer closes its Kafka client and starts a new
one with the same client id (and group.instance.id, with staticMembership)."""

from dimster.errors import DimsterError
from dimster.workload.model import Workload

CRASH_KEY = "crashConsumers"
RESTART_KEY = "restartConsumers"


def _count(key: str, text: str, what: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if str(count) != text.strip() or count < 1:
        raise DimsterError(f"--set {key}={text}: a number of consumers to {what}, 1 or more")
    return count


def restart_count(text: str, workload: Workload, consumers: int) -> int:
    """The N of `restartConsumers=N`, checked against the run: one error line when it cannot restart."""
    count = _count(RESTART_KEY, text, "restart")
    if workload.consumers_paused:
        raise DimsterError(f"--set {RESTART_KEY}: the consumers are paused and hold no Kafka client; resume them first")
    if count > consumers:
        raise DimsterError(f"--set {RESTART_KEY}={count}: the run has {consumers} consumer(s)")
    return count


def crash_count(text: str, workload: Workload, consumers: int) -> int:
    """The N of `crashConsumers=N`, checked against the run: one error line when it cannot crash."""
    count = _count(CRASH_KEY, text, "crash")
    if workload.consumer_type != "SHARE_GROUP":
        raise DimsterError(f"--set {CRASH_KEY}: only share consumers crash here (this run's are a consumer group)")
    if workload.consumers_paused:
        raise DimsterError(f"--set {CRASH_KEY}: the consumers are paused and hold no records; resume them first")
    if count > consumers:
        raise DimsterError(f"--set {CRASH_KEY}={count}: the run has {consumers} share consumer(s)")
    return count


def victims(client_ids: list[str], count: int, crashed_before: int) -> list[str]:
    """`count` consumers, taking turns: crash k of the run starts where crash k-1 stopped."""
    start = crashed_before % len(client_ids)
    turn = client_ids[start:] + client_ids[:start]
    return turn[:count]


def due_crashes(workload: Workload, elapsed: float, fired: int) -> list[int]:
    """The scheduled crashes (their indexes in `consumerCrashes`) due by `elapsed` seconds of load
    that have not fired yet (the first `fired` have)."""
    return [i for i, crash in enumerate(workload.consumer_crashes) if i >= fired and crash.at_seconds <= elapsed]
