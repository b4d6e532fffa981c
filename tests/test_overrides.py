"""`--set` overrides: key paths (Kafka property names keep their dots), values read as YAML, the
`k=v` and `k v` forms, and their effect on a loaded workload (`load_workload`)."""

from pathlib import Path

import pytest

from dimster.errors import DimsterError
from dimster.workload.model import load_workload
from dimster.workload.overrides import apply_overrides, parse_set_arguments, parse_value, split_path

pytestmark = pytest.mark.unit

MINIMAL = Path(__file__).parent / "workloads" / "good" / "minimal.yaml"

# split_path


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("producerRate", ["producerRate"]),
        ("payload.type", ["payload", "type"]),
        ("acknowledgement.releaseFraction", ["acknowledgement", "releaseFraction"]),
        ("kafkaConfig.producerConfig.batch.size", ["kafkaConfig", "producerConfig", "batch.size"]),
        ("kafkaConfig.producerConfig.linger.ms", ["kafkaConfig", "producerConfig", "linger.ms"]),
        ("kafkaConfig.commonConfig.client.id", ["kafkaConfig", "commonConfig", "client.id"]),
        ("kafkaConfig.consumerConfig.fetch.min.bytes", ["kafkaConfig", "consumerConfig", "fetch.min.bytes"]),
        (
            "kafkaConfig.shareConsumerConfig.share.acknowledgement.mode",
            ["kafkaConfig", "shareConsumerConfig", "share.acknowledgement.mode"],
        ),
        ("kafkaConfig.topicConfig.min.insync.replicas", ["kafkaConfig", "topicConfig", "min.insync.replicas"]),
        ("kafkaConfig.producerConfig.acks", ["kafkaConfig", "producerConfig", "acks"]),
        ("brokerConfig.num.network.threads", ["brokerConfig", "num.network.threads"]),
        ("kafkaConfig.producerConfig", ["kafkaConfig", "producerConfig"]),  # the section itself
        ("kafkaConfig.producerConfigs.a.b", ["kafkaConfig", "producerConfigs", "a", "b"]),  # not a section
        ("brokerConfigX.a.b", ["brokerConfigX", "a", "b"]),
    ],
)
def test_split_path(key, expected):
    assert split_path(key) == expected


# parse_value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60000", 60000),
        ("0.25", 0.25),
        ("-3", -3),
        ("true", True),
        ("false", False),
        ("SHARE_GROUP", "SHARE_GROUP"),
        ("all", "all"),
        ("lz4", "lz4"),
        ("", ""),
        ("'007'", "007"),
        ("hello world", "hello world"),
        (
            "{type: ONCE, segments: [{rate: 5, durationSeconds: 10}]}",
            {"type": "ONCE", "segments": [{"rate": 5, "durationSeconds": 10}]},
        ),
        ("[1, 2]", [1, 2]),
        ("null", None),
    ],
)
def test_parse_value_reads_yaml(text, expected):
    assert parse_value(text) == expected
    assert type(parse_value(text)) is type(expected)


@pytest.mark.parametrize("text", ["[1, 2", "{a: 1", "a: b: c", "key: [unclosed"])
def test_parse_value_falls_back_to_the_text(text):
    assert parse_value(text) == text


# parse_set_arguments


def test_key_equals_value_items():
    assert parse_set_arguments(["producerRate=60000", "payload.type=COMPRESSIBLE"]) == [
        ("producerRate", "60000"),
        ("payload.type", "COMPRESSIBLE"),
    ]


def test_key_space_value_pairs():
    assert parse_set_arguments(["producerRate", "60000", "topics", "3"]) == [("producerRate", "60000"), ("topics", "3")]


def test_mixed_forms_keep_their_order():
    items = ["a=1", "b", "2", "c=3", "d", "4"]
    assert parse_set_arguments(items) == [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]


def test_value_may_contain_equals_signs():
    assert parse_set_arguments(["name=a=b"]) == [("name", "a=b")]
    assert parse_set_arguments(["kafkaConfig.commonConfig.sasl.jaas.config", "x=y z=w"]) == [
        ("kafkaConfig.commonConfig.sasl.jaas.config", "x=y z=w")
    ]


def test_whitespace_around_equals_is_dropped():
    assert parse_set_arguments([" producerRate = 5 "]) == [("producerRate", "5")]


def test_empty_value():
    assert parse_set_arguments(["name="]) == [("name", "")]


def test_no_items():
    assert parse_set_arguments([]) == []


def test_key_without_value_is_an_error():
    with pytest.raises(DimsterError, match=r"--set producerRate: needs a value") as raised:
        parse_set_arguments(["topics=2", "producerRate"])
    assert raised.value.exit_code == 2


@pytest.mark.parametrize("item", ["=5", ".producerRate=5", "payload.=RANDOM", " =1"])
def test_malformed_keys_are_errors(item):
    with pytest.raises(DimsterError, match="not a key path"):
        parse_set_arguments([item])


# apply_overrides


def test_apply_sets_top_level_and_nested_keys():
    data = {"name": "w", "payload": {"type": "RANDOM"}}
    result = apply_overrides(data, [("producerRate", "60000"), ("payload.compressibleRatio", "0.8")])
    assert result == {"name": "w", "producerRate": 60000, "payload": {"type": "RANDOM", "compressibleRatio": 0.8}}


def test_apply_leaves_the_input_alone():
    data = {"name": "w", "payload": {"type": "RANDOM"}}
    apply_overrides(data, [("payload.type", "COMPRESSIBLE")])
    assert data == {"name": "w", "payload": {"type": "RANDOM"}}


def test_kafka_property_names_stay_one_key():
    result = apply_overrides({"name": "w"}, [("kafkaConfig.producerConfig.batch.size", "65536")])
    assert result["kafkaConfig"] == {"producerConfig": {"batch.size": 65536}}


def test_kafka_property_next_to_existing_ones():
    data = {"kafkaConfig": {"producerConfig": {"linger.ms": 5, "acks": "all"}}, "brokerConfig": {"num.io.threads": 8}}
    result = apply_overrides(
        data, [("kafkaConfig.producerConfig.linger.ms", "10"), ("brokerConfig.num.io.threads", "16")]
    )
    assert result == {
        "kafkaConfig": {"producerConfig": {"linger.ms": 10, "acks": "all"}},
        "brokerConfig": {"num.io.threads": 16},
    }


def test_empty_section_in_the_file_is_filled():
    result = apply_overrides({"payload": None}, [("payload.type", "COMPRESSIBLE")])
    assert result == {"payload": {"type": "COMPRESSIBLE"}}


def test_later_pairs_win():
    assert apply_overrides({}, [("topics", "2"), ("topics", "5")]) == {"topics": 5}


def test_a_whole_mapping_can_be_set():
    result = apply_overrides(
        {}, [("producerRateSchedule", "{type: REPEATING, segments: [{rate: 5, durationSeconds: 1}]}")]
    )
    assert result["producerRateSchedule"] == {"type": "REPEATING", "segments": [{"rate": 5, "durationSeconds": 1}]}


def test_setting_below_a_value_is_an_error():
    with pytest.raises(DimsterError, match=r"--set name\.first: 'name' is a value, not a section"):
        apply_overrides({"name": "w"}, [("name.first", "x")])
    with pytest.raises(DimsterError, match=r"'payload\.type' is a value, not a section"):
        apply_overrides({"payload": {"type": "RANDOM"}}, [("payload.type.x", "1")])


# load_workload with overrides


def test_minimal_workload_defaults():
    workload = load_workload(MINIMAL)
    assert workload.name == "minimal"
    assert (workload.topics, workload.partitions_per_topic, workload.producer_rate) == (1, 1, 1000)
    assert workload.consumer_type == "SHARE_GROUP"
    assert workload.message_distributor == "NO_KEY"
    assert workload.producer_rate_schedule is None


def test_load_workload_applies_overrides():
    workload = load_workload(
        MINIMAL,
        parse_set_arguments(
            [
                "producerRate=60000",
                "topics",
                "3",
                "kafkaConfig.producerConfig.batch.size=65536",
                "kafkaConfig.producerConfig.compression.type=lz4",
                "brokerConfig.num.io.threads=16",
                "acknowledgement.mode=EXPLICIT",
                "acknowledgement.rejectFraction=0.1",
            ]
        ),
    )
    assert workload.producer_rate == 60000
    assert workload.topics == 3
    assert workload.kafka_config.producer_config == {"batch.size": 65536, "compression.type": "lz4"}
    assert workload.broker_config == {"num.io.threads": 16}
    assert workload.acknowledgement.mode == "EXPLICIT"
    assert workload.acknowledgement.reject_fraction == 0.1


def test_load_workload_schedule_override():
    schedule = (
        "{type: REPEATING, segments: [{rate: 5, durationSeconds: 10}, {fromRate: 5, toRate: 50, durationSeconds: 5}]}"
    )
    workload = load_workload(MINIMAL, [("producerRateSchedule", schedule)])
    assert workload.producer_rate_schedule.type == "REPEATING"
    assert [s.duration_seconds for s in workload.producer_rate_schedule.segments] == [10, 5]


@pytest.mark.parametrize(
    ("pairs", "fragment"),
    [
        ([("producerRate", "-1")], "key 'producerRate': Input should be greater than or equal to 0 (got -1)"),
        ([("consumerType", "SHARE")], "key 'consumerType': Input should be 'SHARE_GROUP' or 'CONSUMER_GROUP'"),
        ([("payload.typ", "RANDOM")], "unknown key 'payload.typ' (did you mean 'type'?)"),
        ([("producerRat", "5")], "unknown key 'producerRat' (did you mean 'producerRate'?)"),
        ([("kafkaConfig.producerConfg.acks", "all")], "unknown key 'kafkaConfig.producerConfg'"),
    ],
)
def test_bad_override_names_the_file_and_key(pairs, fragment):
    with pytest.raises(DimsterError) as raised:
        load_workload(MINIMAL, pairs)
    message = str(raised.value)
    assert "minimal.yaml" in message
    assert fragment in message
    assert "\n" not in message


def test_override_below_a_value_in_the_file_is_an_error():
    with pytest.raises(DimsterError, match="'name' is a value, not a section"):
        load_workload(MINIMAL, [("name.x", "1")])


def test_null_removes_a_key_back_to_its_default():
    data = {"producerRate": 5, "kafkaConfig": {"shareConsumerConfig": {"share.acquire.mode": "record_limit"}}}
    result = apply_overrides(data, [("kafkaConfig.shareConsumerConfig.share.acquire.mode", "null")])
    assert result == {"producerRate": 5, "kafkaConfig": {"shareConsumerConfig": {}}}
    assert apply_overrides(data, [("producerRate", "null")])["kafkaConfig"] == data["kafkaConfig"]
    assert "producerRate" not in apply_overrides(data, [("producerRate", "null")])


def test_client_library_for_all_roles_or_per_role():
    everything = load_workload(MINIMAL, [("clientLibrary", "java")]).client_library
    assert (everything.producer, everything.consumer, everything.share_consumer) == ("java", "java", "java")
    one = load_workload(MINIMAL, [("clientLibrary.shareConsumer", "java")]).client_library
    assert (one.producer, one.consumer, one.share_consumer) == ("librdkafka", "librdkafka", "java")
    with pytest.raises(DimsterError, match=r"key 'clientLibrary': must be librdkafka or java.*\(got 'jvm'\)"):
        load_workload(MINIMAL, [("clientLibrary", "jvm")])
    with pytest.raises(DimsterError, match=r"key 'clientLibrary.producer': Input should be 'librdkafka' or 'java'"):
        load_workload(MINIMAL, [("clientLibrary.producer", "rust")])


def test_one_role_can_be_set_over_the_short_form_in_the_file(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\nclientLibrary: java\n")
    library = load_workload(path, [("clientLibrary.shareConsumer", "librdkafka")]).client_library
    assert (library.producer, library.consumer, library.share_consumer) == ("java", "java", "librdkafka")
