"""Environment profiles: `run/environments/<name>.yaml` says where and how a cluster runs.

A profile is one of three models, picked by its `backend` key: `local` (KRaft nodes as JVM processes on
this host), `docker` (KRaft nodes as containers) and `external` (a cluster someone else runs)."""

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dimster.errors import DimsterError
from dimster.paths import environments_dir, project_dir, state_dir
from dimster.yamlfile import load_mapping, validation_error_line

DEFAULT_KAFKA_VERSION = "4.3.1"


def subnet_addresses(subnet: str, nodes: int) -> tuple[str, list[str]]:
    """(this host's address on the bridge, each node's address): the first hosts of `subnet`, in order."""
    hosts = ipaddress.ip_network(subnet).hosts()
    bridge = str(next(hosts))
    return bridge, [str(next(hosts)) for _ in range(nodes)]


class AgentAddress(BaseModel):
    """A `dimster worker serve` agent."""

    model_config = ConfigDict(extra="forbid")
    address: str = Field(..., pattern=r"^\S+:\d{1,5}$")


class DockerWorkers(BaseModel):
    """`workers: {docker: N}`: N agents as containers of dimster's worker image, for the run only."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    docker: int = Field(..., ge=1, le=64)
    image: str | None = Field(None, min_length=1)  # default: `dimster image build`'s, built when missing
    docker_host: str | None = Field(None, alias="dockerHost", min_length=3)  # default: the profile's, $DOCKER_HOST


class Security(BaseModel):
    """`security:` of a local profile: SASL_SSL listeners with one SCRAM user. The password is named,
    never written: an environment variable (`passwordEnv`) or a file (`passwordFile`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    protocol: Literal["SASL_SSL"] = "SASL_SSL"
    mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    user: str = Field("dimster", pattern=r"^[A-Za-z0-9._@-]+$")
    password_env: str | None = Field(None, alias="passwordEnv", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    password_file: str | None = Field(None, alias="passwordFile", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data):
        if isinstance(data, dict):
            inline = [k for k in data if "password" in str(k).lower() and k not in ("passwordEnv", "passwordFile")]
            if inline:
                raise ValueError(
                    f"{', '.join(inline)}: a password is never written in a profile; "
                    "use passwordEnv: NAME or passwordFile: FILE"
                )
        return data

    @model_validator(mode="after")
    def _one_source(self):
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError("give the password's source: passwordEnv: NAME or passwordFile: FILE (one of them)")
        return self

    def password_source(self) -> str:
        """Where the password is read from, in the user's words."""
        return f"${self.password_env}" if self.password_env else f"file {self.password_file}"

    def password(self, profile_name: str) -> str:
        """The user's password from its variable or file; one line saying how to provide it when it is missing."""
        where = f"run/environments/{profile_name}.yaml"
        if self.password_env:
            password = os.environ.get(self.password_env, "")
            if not password:
                raise DimsterError(
                    f"'{profile_name}' needs the password of SCRAM user {self.user} in the environment "
                    f"variable {self.password_env} (security.passwordEnv in {where}): export it, or name a file "
                    "with security.passwordFile"
                )
            return password
        path = Path(self.password_file or "").expanduser()
        path = path if path.is_absolute() else project_dir() / path
        try:
            password = path.read_text().strip()
        except OSError as e:
            raise DimsterError(
                f"'{profile_name}' reads the password of SCRAM user {self.user} from {self.password_file} "
                f"(security.passwordFile in {where}), which is unreadable: {e.strerror}"
            ) from None
        if not password:
            raise DimsterError(
                f"{self.password_file} (security.passwordFile in {where}) is empty: write the password in it"
            )
        return password

    def client_properties(self, password: str, ca_pem: str) -> dict[str, str]:
        """What a client needs to reach the SASL_SSL listeners, in librdkafka's names (see
        clients/properties.py for Kafka's Java names): the CA certificate itself, not its file, so
        that clients on other hosts can use it too."""
        return {
            "security.protocol": self.protocol,
            "sasl.mechanisms": self.mechanism,
            "sasl.username": self.user,
            "sasl.password": password,
            "ssl.ca.pem": ca_pem,
        }


class ProfileBase(BaseModel):
    """What every backend's profile has: the Kafka version, the broker config, the workers."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

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
    def _keys_of_other_backends(cls, data):
        """A key another backend has, named with the backends that take it."""
        if not isinstance(data, dict):
            return data
        own = _keys(cls)
        foreign = {}
        for key in data:
            if key not in own:
                takers = [backend for backend, model in PROFILES.items() if key in _keys(model)]
                if takers:
                    foreign[key] = takers
        if foreign:
            key, takers = next(iter(foreign.items()))
            why = " (an external cluster's brokers are read from it)" if data.get("backend") == "external" else ""
            raise ValueError(f"{key}: only for backend: {' or '.join(takers)}{why}")
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


class NodesProfile(ProfileBase):
    """A cluster dimster runs itself: `nodes` KRaft nodes (each broker and controller) with consecutive
    ids, listening for clients on consecutive ports of this host."""

    nodes: int = Field(1, ge=1, le=9)
    first_node_id: int = Field(1, alias="firstNodeId", ge=0, le=1000)
    heap: str = Field("1g", pattern=r"^\d+[mMgG]$")
    host: str = "127.0.0.1"
    broker_port_base: int = Field(19092, alias="brokerPortBase", ge=1024, le=65000)
    # brokers serve their JMX metrics for Prometheus (the JMX exporter agent) on this base + node index
    broker_metrics: bool = Field(True, alias="brokerMetrics")
    broker_metrics_port_base: int | None = Field(None, alias="brokerMetricsPortBase", ge=1024, le=65000)

    @property
    def cluster_dir(self) -> Path:
        """Configs, state and (for `local`) data and logs of this environment's nodes."""
        return state_dir() / "clusters" / self.name

    @property
    def node_ids(self) -> list[int]:
        """Kafka node ids: `nodes` consecutive ids from `firstNodeId`."""
        return [self.first_node_id + i for i in range(self.nodes)]

    def node_index(self, node_id: int) -> int:
        """Position (0-based) of `node_id` among the nodes: it picks the node's ports."""
        return node_id - self.first_node_id

    def broker_port(self, node_index: int) -> int:
        return self.broker_port_base + node_index

    def broker_metrics_port(self, node_index: int) -> int:
        return (self.broker_metrics_port_base or self.default_metrics_port_base) + node_index

    @property
    def default_metrics_port_base(self) -> int:
        return self.broker_port_base + 10

    @property
    def broker_metrics_urls(self) -> dict[int, str]:
        if not self.broker_metrics:
            return {}
        return {
            node_id: f"http://{self.node_host(i)}:{self.broker_metrics_port(i)}/metrics"
            for i, node_id in enumerate(self.node_ids)
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.node_host(i)}:{self.broker_port(i)}" for i in range(self.nodes))

    def node_host(self, node_index: int) -> str:
        """The address node `node_index` listens on."""
        return self.host


class LocalProfile(NodesProfile):
    """The `local` backend: the nodes are JVM processes on this host."""

    backend: Literal["local"] = "local"
    controller_port_base: int = Field(19192, alias="controllerPortBase", ge=1024, le=65000)
    data_dir: str | None = Field(None, alias="dataDir")
    security: Security | None = None  # SASL_SSL listeners with a SCRAM user; None: PLAINTEXT
    # each node in a network namespace of its own on this private IPv4 subnet (needs root), so that
    # `cluster isolate` can cut it off; this host takes the subnet's first address, node i the (i+2)nd
    node_network: str | None = Field(None, alias="nodeNetwork")

    @field_validator("node_network")
    @classmethod
    def _private_subnet(cls, subnet: str | None) -> str | None:
        if subnet is None:
            return None
        try:
            network = ipaddress.IPv4Network(subnet)
        except ValueError:
            raise ValueError(f"'{subnet}' is not an IPv4 subnet such as 10.213.7.0/24") from None
        if not network.is_private or network.is_loopback or network.num_addresses < 16:
            raise ValueError(f"'{subnet}' must be a private IPv4 subnet of 16 addresses or more, such as 10.213.7.0/24")
        return str(network)

    def node_host(self, node_index: int) -> str:
        if not self.node_network:
            return self.host
        return subnet_addresses(self.node_network, node_index + 1)[1][node_index]

    @property
    def cluster_dir(self) -> Path:
        if self.data_dir:
            path = Path(self.data_dir).expanduser()
            return path if path.is_absolute() else project_dir() / path
        return super().cluster_dir

    def controller_port(self, node_index: int) -> int:
        return self.controller_port_base + node_index

    @property
    def default_metrics_port_base(self) -> int:
        return self.controller_port_base + 10


class DockerProfile(NodesProfile):
    """The `docker` backend: the nodes are containers of a Docker-compatible daemon; their client and
    metrics ports are published on `host`."""

    backend: Literal["docker"] = "docker"
    docker_host: str | None = Field(None, alias="dockerHost", min_length=3)  # default: $DOCKER_HOST, the SDK's
    image: str | None = Field(None, min_length=1)  # default: apache/kafka:<kafkaVersion>

    @property
    def kafka_image(self) -> str:
        return self.image or f"apache/kafka:{self.kafka_version}"


class ExternalProfile(ProfileBase):
    """The `external` backend: a cluster someone else runs; its brokers are read from it."""

    backend: Literal["external"] = "external"
    external_bootstrap: str | None = Field(None, alias="bootstrapServers", min_length=3)

    @model_validator(mode="after")
    def _needs_bootstrap(self):
        if not self.external_bootstrap:
            raise ValueError("backend: external needs bootstrapServers (host:port[,host:port...])")
        return self

    @property
    def bootstrap_servers(self) -> str:
        return self.external_bootstrap or ""


EnvironmentProfile = LocalProfile | DockerProfile | ExternalProfile
PROFILES: dict[str, type[ProfileBase]] = {"local": LocalProfile, "docker": DockerProfile, "external": ExternalProfile}


def _keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def profile_model(data: dict) -> type[ProfileBase]:
    """The profile model of the backend `data` names (`local` when it names none)."""
    backend = data.get("backend", "local")
    if not isinstance(backend, str) or backend not in PROFILES:
        raise DimsterError(f"backend: '{backend}' is not a backend (valid: {', '.join(PROFILES)})")
    return PROFILES[backend]


def parse_profile(data: dict) -> EnvironmentProfile:
    """Validate `data` as the profile of the backend it names; raises pydantic's ValidationError."""
    return profile_model(data).model_validate(data)  # type: ignore[return-value]


ENVIRONMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_environment_name(env: str) -> None:
    """An environment is named, never a path: `../x` must not reach files outside their folders."""
    if not ENVIRONMENT_NAME.fullmatch(env):
        raise DimsterError(f"invalid environment name '{env}': letters, digits, '.', '_' and '-' only")


def known_environments() -> list[str]:
    return sorted(p.stem for p in environments_dir().glob("*.yaml"))


def load_environment(name: str) -> EnvironmentProfile:
    check_environment_name(name)
    path = environments_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(known_environments()) or "none"
        raise DimsterError(f"unknown environment '{name}': no {path.name} in run/environments (known: {known})")
    data = {**load_mapping(path, "environment"), "name": name}
    source = f"run/environments/{path.name}"
    try:
        model = profile_model(data)
    except DimsterError as e:
        raise DimsterError(f"{source}: {e}") from None
    try:
        return model.model_validate(data)  # type: ignore[return-value]
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
