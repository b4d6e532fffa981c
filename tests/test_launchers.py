"""The worker launchers: the environment's `workers:` form picks the one that starts a run's workers,
and a launcher says before anything starts what its workers cannot run."""

import pytest

from dimster.coordinator.workers.containers import ContainerLauncher
from dimster.coordinator.workers.launchers import LAUNCHERS, workers_for
from dimster.coordinator.workers.local import LocalLauncher
from dimster.coordinator.workers.remote import AgentLauncher
from dimster.environment import parse_profile
from dimster.errors import DimsterError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("workers", "launcher", "count"),
    [
        (3, LocalLauncher, 3),
        ([{"address": "127.0.0.1:7070"}, {"address": "127.0.0.1:7071"}], AgentLauncher, 2),
        ({"docker": 4}, ContainerLauncher, 4),
    ],
)
def test_the_workers_form_picks_its_launcher_and_count(workers, launcher, count):
    chosen = workers_for(parse_profile({"name": "w", "workers": workers}), progress=lambda _line: None)
    assert type(chosen) is launcher and chosen.count == count


def test_every_form_has_exactly_one_launcher():
    forms = [parse_profile({"name": "w", "workers": w}).workers for w in (2, [{"address": "h:1"}], {"docker": 1})]
    assert [sum(launcher.takes(form) for launcher in LAUNCHERS) for form in forms] == [1, 1, 1]


def test_worker_containers_refuse_another_kafka_clients_version_before_anything_starts():
    profile = parse_profile({"name": "w", "kafkaVersion": "4.3.1", "workers": {"docker": 2}})
    launcher = workers_for(profile)
    launcher.check_client_versions({"producers": "4.3.1"})
    with pytest.raises(DimsterError, match=r"clientVersion 4\.2\.0: worker containers hold .* Kafka 4\.3\.1"):
        launcher.check_client_versions({"producers": "4.3.1", "consumers": "4.2.0"})
    workers_for(parse_profile({"name": "w", "workers": 2})).check_client_versions({"consumers": "4.2.0"})


def test_a_launcher_that_never_started_closes_without_a_word():
    for workers in (2, [{"address": "127.0.0.1:1"}], {"docker": 1}):
        workers_for(parse_profile({"name": "w", "workers": workers})).close()
