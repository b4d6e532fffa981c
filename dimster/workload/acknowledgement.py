"""A share group's acknowledgement (`acknowledgement:` of the workload): Kafka's
`share.acknowledgement.mode`, spelt as Kafka spells it or upper-case, and the outcomes dimster chooses."""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from dimster.workload.strict import EitherCase, Strict

KafkaMode = Annotated[Literal["IMPLICIT", "EXPLICIT"], EitherCase()]  # Kafka spells them `explicit`


class Acknowledgement(Strict):
    """Share groups: IMPLICIT accepts every record on the next poll; EXPLICIT accepts, releases or
    rejects each record with the given fractions (the rest is accepted)."""

    mode: KafkaMode = "IMPLICIT"
    release_fraction: float = Field(0.0, alias="releaseFraction", ge=0, le=1)
    reject_fraction: float = Field(0.0, alias="rejectFraction", ge=0, le=1)
    # KIP-1222: renew the acquisition lock of records still being processed at half its time-out
    renew_locks: bool = Field(False, alias="renewLocks")

    @model_validator(mode="after")
    def _fractions(self):
        if self.release_fraction + self.reject_fraction > 1:
            raise ValueError("releaseFraction + rejectFraction must be at most 1")
        if self.mode == "IMPLICIT" and (self.release_fraction or self.reject_fraction):
            raise ValueError("releaseFraction and rejectFraction need mode: EXPLICIT")
        if self.mode == "IMPLICIT" and self.renew_locks:
            raise ValueError("renewLocks needs mode: EXPLICIT (Kafka renews locks only on explicit acknowledgement)")
        return self
