"""Environment profiles: `run/environments/<name>.yaml` says where and how a cluster runs."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dimster.errors import DimsterError
from dimster.paths import environments_dir, project_dir, state_dir
from dimster.yamlfile import load_mapping, validation_error_line

DEFAULT_KAFKA_VERSION = "4.3.1"


class EnvironmentProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = ""
    backend: Literal["local", "external"] = "local"
    external_bootstrap: str | None = Field(None, alias="bootstrapServers", min_length=3)
    nodes: int = Field(1, ge=1, le=9)
    heap: str = Field("1g", pattern=r"^\d+[mMgG]$")
    host: str = "127.0.0.1"
    broker_port_base: int = Field(19092, alias="brokerPortBase", ge=1024, le=65000)
    controller_port_base: int = Field(19192, alias="controllerPortBase", ge=1024, le=65000)
    data_dir: str | None = Field(None, alias="dataDir")
    kafka_version: str = Field(DEFAULT_KAFKA_VERSION, alias="kafkaVersion", pattern=r"^\d+\.\d+\.\d+$")
    broker_config: str = Field("run/broker-configs/default.yaml", alias="brokerConfig")
    broker_overrides: dict[str, str | int | float | bool] = Field(default_factory=dict, alias="brokerOverrides")
    workers: int = Field(1, ge=1, le=64)
    start_timeout_seconds: int = Field(120, alias="startTimeoutSeconds", ge=10)

    @field_validator("kafka_version")
    @classmethod
    def _at_least_4_2(cls, version: str) -> str:
        major, minor, _ = (int(p) for p in version.split("."))
        if (major, minor) < (4, 2):
            raise ValueError("must be 4.2.0 or newer (share groups are production-ready from 4.2)")
        return version

    @property
    def cluster_dir(self) -> Path:
        """Data, configs, logs and process ids of this environment's nodes."""
        if self.data_dir:
            path = Path(self.data_dir).expanduser()
            return path if path.is_absolute() else project_dir() / path
        return state_dir() / "clusters" / self.name

    @property
    def broker_config_path(self) -> Path:
        path = Path(self.broker_config)
        return path if path.is_absolute() else project_dir() / path

    def broker_port(self, node_index: int) -> int:
        return self.broker_port_base + node_index

    def controller_port(self, node_index: int) -> int:
        return self.controller_port_base + node_index

    @model_validator(mode="after")
    def _external_needs_bootstrap(self):
        if self.backend == "external" and not self.external_bootstrap:
            raise ValueError("backend: external needs bootstrapServers (host:port[,host:port...])")
        return self

    @property
    def bootstrap_servers(self) -> str:
        if self.external_bootstrap:
            return self.external_bootstrap
        return ",".join(f"{self.host}:{self.broker_port(i)}" for i in range(self.nodes))


def known_environments() -> list[str]:
    return sorted(p.stem for p in environments_dir().glob("*.yaml"))


def load_environment(name: str) -> EnvironmentProfile:
    path = environments_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(known_environments()) or "none"
        raise DimsterError(f"unknown environment '{name}': no {path.name} in run/environments (known: {known})")
    data = load_mapping(path, "environment")
    try:
        profile = EnvironmentProfile.model_validate({**data, "name": name})
    except ValidationError as e:
        raise DimsterError(validation_error_line(f"run/environments/{path.name}", e, EnvironmentProfile)) from None
    return profile
