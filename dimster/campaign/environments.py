"""Environment keys as campaign dimensions: a dimension keyed `cluster.<key>` (`cluster.kafkaVersion`,
`cluster.nodes`, `cluster.heap`) runs each point on a cluster of that environment, which the campaign
brings up itself. Each environment (a point's `cluster.` values together) starts once, with fresh
data: a node's storage cannot go back to an older Kafka, nor keep its quorum when the node count
changes. Only the keys that leave the cluster reachable where the profile says may vary."""

import os
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from dimster.cluster.backends import backend_for, profile_models
from dimster.errors import DimsterError
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.helper import end_idle_helper
from dimster.profile import ProfileBase, profile_keys
from dimster.yamlfile import closest

CLUSTER_PREFIX = "cluster."
VARIABLE_KEYS = ("kafkaVersion", "nodes", "heap")  # the environment keys a campaign may vary
VERSION = re.compile(r"\d+\.\d+\.\d+")


def environment_key(key: str) -> str | None:
    """The environment key a dimension's key names (`cluster.nodes` -> `nodes`), or None for a workload key."""
    return key.removeprefix(CLUSTER_PREFIX) if key.startswith(CLUSTER_PREFIX) else None


def check_cluster_key(key: str, source: str) -> None:
    """A `cluster.` key that may vary between points, or one line naming the ones that may."""
    name = environment_key(key)
    if name not in VARIABLE_KEYS:
        valid = [CLUSTER_PREFIX + k for k in VARIABLE_KEYS]
        known = {k for model in profile_models().values() for k in profile_keys(model)}
        what = "cannot vary between points" if name in known else f"is no environment key{closest(key, valid)}"
        raise DimsterError(
            f"{source}: '{key}' {what}: the environment keys a campaign varies are {', '.join(valid)} "
            "(the others stay as the environment's profile says)"
        )


def check_varied(profile: ProfileBase, keys: set[str], source: str) -> None:
    """A profile whose cluster the campaign may bring up and down at each of `keys`' values."""
    if not keys:
        return
    first = CLUSTER_PREFIX + sorted(keys)[0]
    if profile.backend == "external":
        raise DimsterError(
            f"{source}: {first}: '{profile.name}' is an external cluster, which dimster does not bring up; "
            "a cluster. dimension needs an environment of backend local or docker"
        )
    if "kafkaVersion" in keys and os.environ.get("KAFKA_HOME"):
        raise DimsterError(
            f"{source}: cluster.kafkaVersion: KAFKA_HOME is set, so every point would run that one "
            "distribution; unset it to run each version from dimster's cache"
        )
    if "kafkaVersion" in keys and (image := getattr(profile, "image", None)):
        raise DimsterError(
            f"{source}: cluster.kafkaVersion: '{profile.name}' names its image ({image}), one version; "
            "drop image: from its profile to run apache/kafka:<version> at each point"
        )


def point_profile(profile: ProfileBase, environment: dict[str, Any], source: str = "") -> ProfileBase:
    """The profile with a point's environment values, validated as the profile file's would be."""
    if not environment:
        return profile
    for key, value in environment.items():
        if key == "kafkaVersion" and not (isinstance(value, str) and VERSION.fullmatch(value)):
            raise DimsterError(f"{source}: cluster.kafkaVersion value {value!r} is not a Kafka version such as 4.3.1")
    try:
        return type(profile).model_validate({**profile.model_dump(by_alias=True), **environment})
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise DimsterError(f"{source}: cluster.{key} value {first.get('input')!r}: {message}") from None


def shown(environment: dict[str, Any]) -> str:
    """`kafkaVersion=4.3.1, nodes=3`, as the campaign's lines name an environment."""
    return ", ".join(f"{key}={value}" for key, value in environment.items())


def fetch_versions(versions: set[str]) -> None:
    """Every Kafka version the points run, fetched (when not yet) before the first point starts: a
    version Maven Central does not have ends the campaign before anything ran."""
    for version in sorted(versions):
        kafka_distribution(version)


class Environments:
    """The environments a campaign's points run on, as one call of the campaign meets them: each
    starts with the cluster down and its data deleted, through the backend's own `down` and
    `remove_data` (`dimster cluster down ENV --purge`), so that the point's run brings it up fresh;
    `end` does the same to the last one."""

    def __init__(self, say: Callable[[str], None], progress: Callable[[str], None]):
        self.say, self.progress = say, progress
        self.running: dict[str, Any] | None = None  # the `cluster.` values of the last one started
        self.profile: ProfileBase | None = None

    def changes(self, environment: dict[str, Any]) -> bool:
        return bool(environment) and environment != self.running

    def start(self, profile: ProfileBase, environment: dict[str, Any]) -> None:
        self.say(f"== environment {shown(environment)}: '{profile.name}' down, its data deleted, up again fresh")
        self.running, self.profile = environment, profile
        take_down(profile, self.progress)

    def end(self) -> None:
        """The last environment down with its data: the profile's own cluster starts fresh next."""
        if self.running is None or self.profile is None:
            return
        name = self.profile.name
        self.say(f"== the campaign's last environment ({shown(self.running)}): '{name}' down, its data deleted")
        try:
            take_down(self.profile, self.progress)
        except DimsterError as e:  # not to hide what ended the campaign
            self.say(f"== '{name}' did not go down: {e}; `dimster cluster down {name} --purge` ends it")
        self.running = self.profile = None


def take_down(profile: ProfileBase, progress: Callable[[str], None]) -> None:
    cluster = backend_for(profile)
    cluster.down(progress)
    end_idle_helper(profile.kafka_version)
    cluster.remove_data()
