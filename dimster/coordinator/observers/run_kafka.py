"""What a run does on the cluster besides load: creates and deletes its topics, watches brokers and
its groups' assignments, applies live topic changes, and reads where each group stands at the end.
The coordinator's loop reaches Kafka only through this class (and its workers), so tests can drive
that loop with an in-memory stand-in."""

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic

from dimster.coordinator.observers.cluster_watch import BrokerWatch
from dimster.errors import DimsterError
from dimster.kafka.admin import admin_client, describe_brokers, wait_until_partitions_serve
from dimster.kafka.dead_letters import cluster_settings, dead_letter_topic, refusal
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.groups import AssignmentWatch, GroupSpec, LagWatch
from dimster.kafka.properties import property_text
from dimster.kafka.security import ClientSecurity
from dimster.workload.dead_letter import dead_letter_group_config
from dimster.workload.model import Workload

ADMIN_TIMEOUT = 15.0
SHARE_GROUP_START = {"share.auto.offset.reset": "earliest"}  # a run's share groups read its whole topic
SERVE_TIMEOUT = 30.0  # for new partitions to be served (see wait_until_partitions_serve)


class RunKafka:
    def __init__(self, bootstrap: str, kafka_version: str, security: ClientSecurity = None):
        self.bootstrap = bootstrap
        self.security = dict(security or {})  # the cluster's client security (kafka/security.py)
        self.kafka_version = kafka_version
        self.brokers: list[int] = []
        self.dead_letter_topic: str | None = None  # the run's share groups' (workload key deadLetterQueue)
        self.dead_letter_created = False  # by dimster, for the run: deleted with its topics
        self.dead_letter_states: set[bool] = set()  # `enabled` as the run had it, at start and live

    def prepare(self, workload: Workload, topics: list[str], groups: list[str]) -> int:
        """Create the run's topics (after a validate-only pass) and let share groups start at the
        earliest offset. Returns the broker's delivery-count limit for share groups."""
        self.brokers = describe_brokers(self.bootstrap, ADMIN_TIMEOUT, self.security)
        admin = admin_client(self.bootstrap, self.security, **{"socket.connection.setup.timeout.ms": 10_000})
        w = workload
        replication = w.replication_factor or min(3, len(self.brokers))
        broker = ConfigResource(ConfigResource.Type.BROKER, str(self.brokers[0]))
        [described] = admin.describe_configs([broker], request_timeout=ADMIN_TIMEOUT).values()
        broker_config = described.result(timeout=ADMIN_TIMEOUT)
        if w.dead_letter_queue and groups:
            self._prepare_dead_letters(admin, broker_config, w, topics, replication)
        config = {k: property_text(v) for k, v in w.kafka_config.topic_config.items()}
        new_topics = [NewTopic(t, w.partitions_per_topic, replication, config=config) for t in topics]
        for validate_only in (True, False):
            futures = admin.create_topics(new_topics, validate_only=validate_only, request_timeout=ADMIN_TIMEOUT)
            self.results(futures, "topic")
        if not wait_until_partitions_serve(
            self.bootstrap, {t: range(w.partitions_per_topic) for t in topics}, SERVE_TIMEOUT, self.security
        ):
            raise DimsterError(f"the partitions of the run's topics were not served within {SERVE_TIMEOUT:.0f}s")
        if groups:
            configs = {**(SHARE_GROUP_START if w.consumer_type == "SHARE_GROUP" else {}), **self.group_configs(w)}
            resources = group_config_resources(groups, {}, configs)
            if resources:
                for validate_only in (True, False):
                    altered = admin.incremental_alter_configs(resources, validate_only=validate_only)
                    self.results(altered, "the config of")
        entry = broker_config.get("group.share.delivery.count.limit")
        return int(entry.value) if entry is not None and entry.value else 5

    def _prepare_dead_letters(
        self, admin: AdminClient, broker_config: dict, w: Workload, topics: list[str], replication: int
    ) -> None:
        """Check that the cluster will write the run's dead-letter records (it archives them in silence
        when it will not), then create the topic unless it is there or the broker creates it."""
        queue = w.dead_letter_queue
        assert queue is not None
        settings = cluster_settings(broker_config, self.bootstrap, self.kafka_version, self.security)
        topic = queue.topic or settings.prefix + topics[0].rsplit("-", 1)[0]  # prefix, run name and tag
        if problem := refusal(queue, topic, settings, self.kafka_version):
            raise DimsterError(problem)
        self.dead_letter_topic = topic
        self.dead_letter_states.add(queue.enabled)
        if queue.create_topic and topic not in admin.list_topics(timeout=ADMIN_TIMEOUT).topics:
            new = dead_letter_topic(topic, w.partitions_per_topic, replication)
            self.results(admin.create_topics([new], request_timeout=ADMIN_TIMEOUT), "dead-letter topic")
            self.dead_letter_created = True

    def dead_letter_partitions(self) -> int:
        """The dead-letter topic's partitions (0 until the broker has created one it creates)."""
        assert self.dead_letter_topic is not None
        admin = admin_client(self.bootstrap, self.security)
        described = admin.list_topics(self.dead_letter_topic, timeout=ADMIN_TIMEOUT).topics.get(self.dead_letter_topic)
        return 0 if described is None or described.error is not None else len(described.partitions)

    def group_configs(self, w: Workload) -> dict:
        """The workload's group configs with those of its dead-letter queue."""
        return {**w.group_config, **dead_letter_group_config(w.dead_letter_queue, self.dead_letter_topic)}

    def group_config(self, group: str, prefix: str) -> dict[str, str]:
        """The effective configs of `group` whose names start with `prefix` (`share.`, `consumer.`)."""
        admin = admin_client(self.bootstrap, self.security)
        [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)]).values()
        entries = described.result(timeout=ADMIN_TIMEOUT)
        return {name: entry.value for name, entry in sorted(entries.items()) if name.startswith(prefix)}

    def results(self, futures: dict, what: str) -> None:
        """Wait for Admin API futures; a refusal or a silent cluster becomes one DimsterError."""
        for key, future in futures.items():
            name = f"{key.restype.name.lower()} {key.name}" if isinstance(key, ConfigResource) else key
            try:
                future.result(timeout=ADMIN_TIMEOUT + 5)
            except KafkaException as e:
                raise DimsterError(f"the cluster refused {what} {name}: {e.args[0].str()}") from None
            except TimeoutError:
                raise DimsterError(
                    f"cluster at {self.bootstrap} did not answer within {ADMIN_TIMEOUT:.0f}s (unreachable?)"
                ) from None

    def broker_watch(self) -> BrokerWatch:
        return BrokerWatch(self.bootstrap, set(self.brokers), security=self.security)

    def watch_assignments(self, groups: dict[str, GroupSpec], timeout: float) -> AssignmentWatch:
        distribution = kafka_distribution(self.kafka_version)
        return AssignmentWatch(distribution, self.bootstrap, groups, timeout, self.security)

    def watch_lag(self, groups: dict[str, GroupSpec], interval: float) -> LagWatch:
        return LagWatch(kafka_distribution(self.kafka_version), self.bootstrap, groups, interval, self.security)

    def delete_topics(self, topics: list[str]) -> list[str]:
        """Delete the run's topics; returns what could not be deleted, one line each."""
        admin = admin_client(self.bootstrap, self.security)
        problems = []
        if self.dead_letter_created and self.dead_letter_topic:
            topics = [*topics, self.dead_letter_topic]
        for future in admin.delete_topics(topics, request_timeout=ADMIN_TIMEOUT).values():
            try:
                future.result(timeout=ADMIN_TIMEOUT + 5)
            except (KafkaException, TimeoutError) as e:
                problems.append(f"could not delete topic: {e}")
        return problems

    def config_changes(
        self, old: Workload, new: Workload, topics: list[str], effects: set[str], groups: list[str]
    ) -> "ConfigChanges":
        return ConfigChanges(self, old, new, topics, effects, groups)


def config_entries(old: dict, wanted: dict) -> list[ConfigEntry]:
    """Incremental operations from `old` to `wanted` properties: SET what changed, DELETE what went."""
    return [
        ConfigEntry(k, property_text(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in wanted.items()
        if old.get(k) != v
    ] + [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in old if k not in wanted]


def group_config_resources(groups: list[str], old: dict, wanted: dict) -> list[ConfigResource]:
    """The group configs (KIP-848/932 dynamic group configs) of each group, from `old` to `wanted`."""
    entries = config_entries(old, wanted)
    return (
        [ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=entries) for g in groups] if entries else []
    )


class ConfigChanges:
    """A live change to the run's topics (config, partitions) and groups (group config): validated on
    the broker first, so that a modification applies all or nothing."""

    def __init__(
        self, kafka: RunKafka, old: Workload, new: Workload, topics: list[str], effects: set[str], groups: list[str]
    ):
        self.kafka, self.old, self.new, self.topics = kafka, old, new, topics
        self.admin = (
            admin_client(kafka.bootstrap, kafka.security)
            if effects & {"topic-config", "partitions", "group-config"}
            else None
        )
        self.resources = self._config_resources() if "topic-config" in effects else []
        if "group-config" in effects:
            self.resources += group_config_resources(groups, kafka.group_configs(old), kafka.group_configs(new))
        self.partitions = (
            [NewPartitions(t, new.partitions_per_topic) for t in topics] if "partitions" in effects else []
        )

    def _config_resources(self) -> list[ConfigResource]:
        entries = config_entries(self.old.kafka_config.topic_config, self.new.kafka_config.topic_config)
        return [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=entries) for t in self.topics]

    def _admin_client(self) -> AdminClient:
        assert self.admin is not None  # made wherever there are resources or partitions to change
        return self.admin

    def validate(self) -> None:
        if self.resources:
            self.kafka.results(
                self._admin_client().incremental_alter_configs(self.resources, validate_only=True), "the config of"
            )
        if self.partitions:
            self.kafka.results(
                self._admin_client().create_partitions(self.partitions, validate_only=True), "partitions of"
            )

    def apply(self) -> list[str]:
        """Apply; returns notes for the caller."""
        notes = []
        if self.resources:
            self.kafka.results(self._admin_client().incremental_alter_configs(self.resources), "the config of")
            if self.new.dead_letter_queue:
                self.kafka.dead_letter_states.add(self.new.dead_letter_queue.enabled)
        if self.partitions:
            self.kafka.results(self._admin_client().create_partitions(self.partitions), "partitions of")
            grown = dict.fromkeys(self.topics, range(self.old.partitions_per_topic, self.new.partitions_per_topic))
            if not wait_until_partitions_serve(self.kafka.bootstrap, grown, SERVE_TIMEOUT, self.kafka.security):
                notes.append(f"new partitions not served within {SERVE_TIMEOUT:.0f}s; producers use them anyway")
        return notes
