"""A share group's model inputs (diagnosis/limits.py's GroupInputs) from its workload as it is now:
what the live diagnosis reads after each window, and what `dimster tune` predicts from."""

from dimster.diagnosis.limits import DEFAULT_FETCH_MAX_WAIT_MS, DEFAULT_MAX_POLL_RECORDS, GroupInputs
from dimster.workload.model import Workload

LOCKS = "share.partition.max.record.locks"
DEFAULT_RECORD_LOCKS = 2000  # Kafka's group.share.partition.max.record.locks


def record_locks(w: Workload, broker_config: dict[str, str], at_start: dict) -> int:
    """The group's lock budget now: its group config (live), else the brokers' default as they run,
    else as the group had it at start."""
    value = w.group_config.get(LOCKS) or broker_config.get(f"group.{LOCKS}") or at_start.get(LOCKS)
    return int(value or DEFAULT_RECORD_LOCKS)


def group_inputs(w: Workload, locks: int, window: dict, records_per_batch: float | None) -> GroupInputs:
    share = {**w.kafka_config.common_config, **w.kafka_config.share_consumer_config}
    return GroupInputs(
        partitions=w.partitions_per_topic,
        consumers=w.consumers_per_group,
        proc_ms=(w.consumer_proc_ms_min + w.consumer_proc_ms_max) / 2,
        parallelism=w.consumer_proc_parallelism,
        max_poll_records=int(share.get("max.poll.records", DEFAULT_MAX_POLL_RECORDS)),
        acquire_mode=str(share.get("share.acquire.mode", "batch_optimized")),
        record_locks=locks,
        records_per_batch=records_per_batch,
        records_per_poll=window.get("recordsPerPoll"),
        fetch_max_wait_ms=float(share.get("fetch.max.wait.ms", DEFAULT_FETCH_MAX_WAIT_MS)),
        proc_ms_max=w.consumer_proc_ms_max,
    )
