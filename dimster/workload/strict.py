"""The base of every model of a YAML file dimster reads: unknown keys are refused, values are not
coerced, and a key may be given by its YAML name (alias) or its Python name."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)
