"""What a run's last console lines say beside its totals (coordinator/account/end.py)."""

import pytest

from dimster.coordinator.account.end import duplicates_note
from dimster.workload.model import Workload

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("keys", "noted"),
    [
        ({}, True),  # librdkafka's producers are not idempotent unless told
        ({"kafkaConfig": {"producerConfig": {"enable.idempotence": True}}}, False),
        ({"clientLibrary": "java"}, False),  # the Java producer is, with acks=all (its default)
        ({"clientLibrary": "java", "kafkaConfig": {"producerConfig": {"acks": "1"}}}, True),
        ({"clientLibrary": "java", "kafkaConfig": {"commonConfig": {"enable.idempotence": False}}}, True),
    ],
)
def test_duplicates_from_producers_that_are_not_idempotent_are_said_to_be_possibly_the_logs(keys, noted):
    workload = Workload.model_validate({"name": "w", **keys})
    note = duplicates_note(117, workload)
    assert (note is not None) == noted, note
    assert note is None or note.startswith("117 duplicates may include records the producers wrote twice")
    assert duplicates_note(0, workload) is None
