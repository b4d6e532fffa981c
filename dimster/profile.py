"""What every environment profile has, whatever its backend: the Kafka version, the broker config,
the workers and how the run treats them. Each cluster backend's module (cluster/backends.py lists
them) adds its own keys in a subclass; environment.py reads a profile file into the right one."""

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from dimster.paths import project_dir
from dimster.workload.clients import version_tuple

DEFAULT_KAFKA_VERSION = "4.4.0"


def share_feature_level(kafka_version: str) -> int:
    """The `share.version` dimster formats a new cluster with: 2 (share groups with dead-letter queues,
    KIP-1191) from Kafka 4.4, 1 (share groups) before."""
    return 2 if version_tuple(kafka_version) >= (4, 4) else 1


class AgentAddress(BaseModel):
    """A `dimster worker serve` agent."""

    model_config = ConfigDict(extra="forbid")
    address: str = Field(..., pattern=r"^\S+:\d{1,5}$")


class DockerWorkers(BaseModel):
    """`workers: {docker: N}`: N agents as containers of dimster's worker image, for the run only."""

    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True)
    docker: int = Field(..., ge=1, le=64)
    image: str | None = Field(None, min_length=1)  # default: `dimster image build`'s, built when missing
    docker_host: str | None = Field(None, alias="dockerHost", min_length=3)  # default: the profile's, $DOCKER_HOST


class ProfileBase(BaseModel):
    """What every backend's profile has: the Kafka version, the broker config, the workers."""

    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True)

    name: str = ""
    backend: str
    kafka_version: str = Field(DEFAULT_KAFKA_VERSION, alias="kafkaVersion", pattern=r"^\d+\.\d+\.\d+$")
    broker_config: str = Field("run/broker-configs/default.yaml", alias="brokerConfig")
    broker_overrides: dict[str, str | int | float | bool] = Field(default_factory=dict, alias="brokerOverrides")
    metrics_endpoint: bool = Field(True, alias="metricsEndpoint")  # the run's own /metrics
    # a count of worker processes on this host, the agents that run the clients, or agent containers
    workers: int | list[AgentAddress] | DockerWorkers = 1
    worker_token_file: str | None = Field(None, alias="workerTokenFile")
    worker_token_env: str = Field("DIMSTER_WORKER_TOKEN", alias="workerTokenEnv", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    worker_timeout_seconds: float = Field(10, alias="workerTimeoutSeconds", ge=2, le=600)
    on_worker_loss: Literal["fail", "continue"] = Field("fail", alias="onWorkerLoss")
    # what the workers' clients connect to, when that differs from what this host uses
    client_bootstrap_servers: str | None = Field(None, alias="clientBootstrapServers", min_length=3)
    start_timeout_seconds: int = Field(120, alias="startTimeoutSeconds", ge=10)

    def with_broker_config(self, config: dict) -> Self:
        """This profile with a workload's `brokerConfig` laid over its `brokerOverrides`."""
        return self.model_copy(update={"broker_overrides": {**self.broker_overrides, **config}})

    @model_validator(mode="before")
    @classmethod
    def _no_inline_token(cls, data):
        inline = [k for k in data if "token" in str(k).lower() and k not in ("workerTokenFile", "workerTokenEnv")]
        agents = data.get("workers") if isinstance(data.get("workers"), list) else []
        for i, agent in enumerate(agents):
            if isinstance(agent, dict):
                inline += [f"workers[{i}].{k}" for k in agent if "token" in str(k).lower()]
        if inline:
            raise ValueError(
                f"{', '.join(inline)}: a worker token is never written in a profile; "
                "use workerTokenFile: FILE or workerTokenEnv: NAME"
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _keys_of_other_backends(cls, data, info: ValidationInfo):
        """A key another backend has, named with the backends that take it; the backends' profile
        models come with the validation's context (`profiles`: a function giving them by name)."""
        profiles = (info.context or {}).get("profiles")
        if not isinstance(data, dict) or profiles is None:
            return data
        own = profile_keys(cls)
        foreign = {}
        for key in data:
            if key not in own:
                takers = [backend for backend, model in profiles().items() if key in profile_keys(model)]
                if takers:
                    foreign[key] = takers
        if foreign:
            key, takers = next(iter(foreign.items()))
            why = " (an external cluster's brokers are read from it)" if data.get("backend") == "external" else ""
            named = " or ".join([", ".join(takers[:-1]), takers[-1]] if len(takers) > 1 else takers)
            raise ValueError(f"{key}: only for backend: {named}{why}")
        return data

    @field_validator("workers", mode="before")
    @classmethod
    def _docker_workers(cls, workers):
        """`{docker: N}` checked on its own, so that its errors name its keys."""
        if not isinstance(workers, dict):
            return workers
        try:
            return DockerWorkers.model_validate(workers)
        except ValidationError as e:
            first = e.errors()[0]
            key = ".".join(str(part) for part in first["loc"])
            raise ValueError(
                f"workers.{key}: {first['msg']} (workers: a count, a list of {{address: HOST:PORT}}, or {{docker: N}})"
            ) from None

    @field_validator("workers")
    @classmethod
    def _worker_count(cls, workers):
        if isinstance(workers, int) and not 1 <= workers <= 64:
            raise ValueError("a count of local worker processes must be 1-64")
        if isinstance(workers, list) and not workers:
            raise ValueError("list at least one agent ({address: HOST:PORT}) or give a count")
        return workers

    @field_validator("kafka_version")
    @classmethod
    def _at_least_4_2(cls, version: str) -> str:
        major, minor, _ = (int(p) for p in version.split("."))
        if (major, minor) < (4, 2):
            raise ValueError("must be 4.2.0 or newer (share groups are production-ready from 4.2)")
        return version

    @property
    def agents(self) -> list[str]:
        """Addresses of the agents that run the workers; empty when they are local processes or containers."""
        return [a.address for a in self.workers] if isinstance(self.workers, list) else []

    @property
    def docker_workers(self) -> DockerWorkers | None:
        return self.workers if isinstance(self.workers, DockerWorkers) else None

    @property
    def broker_config_path(self) -> Path:
        path = Path(self.broker_config)
        return path if path.is_absolute() else project_dir() / path

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    @property
    def broker_metrics_urls(self) -> dict[int, str]:
        """Node id -> the /metrics URL of its JMX exporter; empty when dimster does not run the brokers."""
        return {}


def profile_keys(model: type[BaseModel]) -> set[str]:
    """The keys a profile model takes, as a profile file spells them."""
    return {field.alias or name for name, field in model.model_fields.items()}
