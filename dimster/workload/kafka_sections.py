"""What a workload's Kafka property sections say beside dimster's own keys: a property that
contradicts one of them, and a section no client of the run reads."""

from typing import Protocol

ACK_MODE = "share.acknowledgement.mode"
CONSUMER_SECTIONS = {  # a consumer section -> (its field, the role whose clients read it)
    "consumerConfig": ("consumer_config", "consumer"),
    "shareConsumerConfig": ("share_consumer_config", "share_consumer"),
}
CLIENTS = {"consumer": "consumer-group consumers", "share_consumer": "share consumers"}


class Sections(Protocol):
    common_config: dict
    consumer_config: dict
    share_consumer_config: dict


def acknowledgement_mode_problem(sections: Sections, mode: str, roles: list[str]) -> str | None:
    """Kafka's share.acknowledgement.mode, where the workload sets it, must say what dimster's
    `acknowledgement.mode` says: dimster acknowledges by its own key and sets Kafka's from it."""
    if "share_consumer" not in roles:
        return None
    for section, properties in (("shareConsumerConfig", sections.share_consumer_config),
                                ("commonConfig", sections.common_config)):  # fmt: skip
        if ACK_MODE in properties and str(properties[ACK_MODE]).strip().lower() != mode.lower():
            return (
                f"kafkaConfig.{section}.{ACK_MODE} '{properties[ACK_MODE]}' contradicts "
                f"acknowledgement.mode {mode}: dimster acknowledges by acknowledgement.mode and sets Kafka's "
                f"{ACK_MODE} from it; drop the property (or set acknowledgement.mode)"
            )
    return None


def unused_section_notes(sections: Sections, roles: list[str]) -> list[str]:
    """A consumer section set where the run has no client of its kind: read by no client, and so
    checked by none."""
    notes = []
    for section, (field, role) in CONSUMER_SECTIONS.items():
        if getattr(sections, field) and role not in roles:
            has = next((f"this run's consumers are {CLIENTS[r]}" for r in roles if r in CLIENTS), "this run has none")
            notes.append(f"kafkaConfig.{section} is for {CLIENTS[role]} and {has}: no client reads it, nor checks it")
    return notes
