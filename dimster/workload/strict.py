"""The base of every model of a YAML file dimster reads: unknown keys are refused, values are not
coerced, and a key has one spelling, its YAML name (camelCase: `producerRate`, never the Python
name `producer_rate`, in a file as in `--set`); a value that mirrors a Kafka property Kafka reads in
any case takes any case (EitherCase)."""

from typing import Any, get_args

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True, strict=True)


class EitherCase:
    """Annotated metadata for a Literal of upper-case values that Kafka reads in any case
    (`share.acknowledgement.mode: explicit`, `security.protocol: sasl_ssl`): the model holds the
    value as listed; one of no case of these is refused as it was written."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        known = {str(v).upper(): v for v in get_args(source)}

        def spelled(value: object) -> object:
            return known.get(value.upper(), value) if isinstance(value, str) else value

        return core_schema.no_info_before_validator_function(spelled, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        json = handler(schema)
        values = json.pop("enum", None) or ([json.pop("const")] if "const" in json else [])
        if values:
            json["enum"] = list(dict.fromkeys([*values, *(str(v).lower() for v in values)]))
        return json
