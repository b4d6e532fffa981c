"""Environment profiles: `run/environments/<name>.yaml` says where and how a cluster runs.

A profile is the model of the backend its `backend` key names (cluster/backends.py lists them; each
backend's module holds its model): `local` (KRaft nodes as JVM processes on this host), `docker` (KRaft
nodes as containers) and `external` (a cluster someone else runs). What they all have is
profile.ProfileBase."""

from pydantic import ValidationError

from dimster.cluster.backends import profile_model, profile_models
from dimster.errors import DimsterError
from dimster.paths import check_environment_name, environments_dir
from dimster.profile import DEFAULT_KAFKA_VERSION, AgentAddress, DockerWorkers, ProfileBase
from dimster.yamlfile import load_mapping, validation_error_line

__all__ = ["DEFAULT_KAFKA_VERSION", "AgentAddress", "DockerWorkers", "EnvironmentProfile", "ProfileBase"]

EnvironmentProfile = ProfileBase  # any backend's profile (its own model adds the backend's keys)


def parse_profile(data: dict) -> EnvironmentProfile:
    """Validate `data` as the profile of the backend it names; raises pydantic's ValidationError."""
    return profile_model(data).model_validate(data, context={"profiles": profile_models})


def known_environments() -> list[str]:
    return sorted(p.stem for p in environments_dir().glob("*.yaml"))


def load_environment(name: str) -> EnvironmentProfile:
    check_environment_name(name)
    path = environments_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(known_environments()) or "none"
        raise DimsterError(f"unknown environment '{name}': no {path.name} in run/environments (known: {known})")
    return environment_from(load_mapping(path, "environment"), name, f"run/environments/{path.name}")


def environment_from(data: dict, name: str, source: str) -> EnvironmentProfile:
    """The profile `data` (read from `source`) as its backend's model, named `name`; one error line."""
    data = {**data, "name": name}
    try:
        model = profile_model(data)
    except DimsterError as e:
        raise DimsterError(f"{source}: {e}") from None
    try:
        return model.model_validate(data, context={"profiles": profile_models})
    except ValidationError as e:
        raise DimsterError(validation_error_line(source, e, model)) from None


def with_worker_count(profile: EnvironmentProfile, count: int | None) -> EnvironmentProfile:
    """The profile with `count` workers for one run or campaign (`--workers N`): local worker processes,
    or agent containers for `workers: {docker: N}`. Agents an environment lists are its own to change."""
    if count is None:
        return profile
    if not 1 <= count <= 64:
        raise DimsterError(f"--workers {count}: give a count from 1 to 64")
    if profile.agents:
        raise DimsterError(
            f"--workers: '{profile.name}' lists its agents (workers: [{{address: ...}}]); "
            f"add or remove agents in run/environments/{profile.name}.yaml"
        )
    docker = profile.docker_workers
    workers = docker.model_copy(update={"docker": count}) if docker else count
    return profile.model_copy(update={"workers": workers})
