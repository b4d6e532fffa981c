"""The share-group cases of docs/share-groups.md that the diagnosis and the tuner are tested on, one
definition each (the tests of the live diagnosis, the tuner's plan and the live tuner share them)."""

from dimster.tuning.levers import LOCKS_KEY, SHARE

LOCKS = LOCKS_KEY
MODE = f"{SHARE}share.acquire.mode"
# 1 partition, 700 msg/s of 100-byte records in batches of about 107 (batch.size 12000), whole batches
# up to max.poll.records 100 a fetch, 4 consumers at 5 ms a record and a budget of 100 locks: one
# consumer busy at a time, 200 msg/s
LIMITED = {
    "partitionsPerTopic": 1,
    "messageSize": 100,
    "producersPerTopic": 1,
    "producerRate": 700,
    "consumersPerGroup": 4,
    "consumerProcMsMin": 5,
    "consumerProcMsMax": 5,
    "warmupSeconds": 0,
    "reportIntervalSeconds": 2,
    "drainTimeoutSeconds": 3,  # a setting may leave a backlog: the account counts it unconsumed
    "groupConfig": {"share.partition.max.record.locks": 100},
    "kafkaConfig": {
        "producerConfig": {"linger.ms": 200, "batch.size": 12000},
        "shareConsumerConfig": {"max.poll.records": 100},
    },
}
LOCK_BUDGET = {"name": "locks", **LIMITED}
# 1 consumer at 5 ms a record: 200 of 700 msg/s
PROCESSING = {
    "name": "proc",
    "producerRate": 700,
    "consumersPerGroup": 1,
    "consumerProcMsMin": 5,
    "consumerProcMsMax": 5,
}
# record_limit with 2 consumers on 6 partitions: a fetch waits out fetch.max.wait.ms at a drained broker
STALL = {
    "name": "stall", "partitionsPerTopic": 6, "producerRate": 20000, "consumersPerGroup": 2,
    "kafkaConfig": {"shareConsumerConfig": {"share.acquire.mode": "record_limit", "max.poll.records": 500}},
}  # fmt: skip
# 48 consumers at 5 ms behind 9,000 msg/s in 103-record batches and 1,000 locks: 10 busy, 2,000 msg/s.
# All 48 busy take ceil(locks / 103) >= 48, 4,842 locks or more: above the 4,000 a group may have
# unless the brokers' group.share.max.partition.max.record.locks is raised (a broker redeploy)
ABOVE_CEILING = {
    **LIMITED, "name": "many", "producerRate": 9000, "consumersPerGroup": 48,
    "groupConfig": {"share.partition.max.record.locks": 1000},
}  # fmt: skip
