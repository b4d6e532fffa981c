"""Values as Kafka's properties syntax spells them, for brokers and clients alike."""

from typing import Any


def property_text(value: Any) -> str:
    """A YAML value as Kafka's config parsers read it: `true`, not `True`; a list comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(property_text(v) for v in value)
    return str(value)
