"""The levers `dimster tune` may pull: workload and share-group keys that change live (the same `--set`
keys `dimster run --modify` takes) and that the share-group model (diagnosis/limits.py) predicts,
each with the values the user allows and a cost to weigh one change against another.

A lever is named `KEY`, `KEY=LOW..HIGH` (whole numbers), or `KEY=A,B` (choices), each optionally with
`@COST`: the cost of one unit more (a consumer, a lane, a record lock) or of a switch of choice. The
default costs make a consumer dearer than a lane of processing, and both dearer than record locks or
settings, as a Kafka engineer would rather change a setting than add a machine's worth of consumers.

The brokers bound a group's lock budget (`group.share.min/max.partition.max.record.locks`, Kafka's 100
and 4,000): a budget above their ceiling takes a broker redeploy that raises it, which the tuner makes
only when allowed (`--allow-redeploy`), at REDEPLOY_COST more."""

from dataclasses import dataclass, replace

from dimster.errors import DimsterError
from dimster.yamlfile import closest

SHARE = "kafkaConfig.shareConsumerConfig."
LOCKS_KEY = "groupConfig.share.partition.max.record.locks"
BATCH_SIZE_KEY = "kafkaConfig.producerConfig.batch.size"
ACQUIRE_MODES = ("batch_optimized", "record_limit")
LADDER = 1.25  # a numeric lever's candidate values beyond its first 64 grow by this factor
LOCKS_CEILING = "group.share.max.partition.max.record.locks"  # the brokers' bound on a group's budget
LOCKS_FLOOR = "group.share.min.partition.max.record.locks"
KAFKA_LOCKS_BOUNDS = (100, 4000)  # Kafka's defaults of the two
REDEPLOY_COST = 2.0  # a broker redeploy restarts every broker under load: dearer than two consumers


@dataclass(frozen=True)
class Lever:
    key: str
    low: int | None = None  # numeric levers: the allowed range
    high: int | None = None
    choices: tuple[str, ...] = ()  # choice levers: the allowed values
    cost: float = 1.0  # of one unit more (numeric), or of a switch (choices)
    ceiling: int | None = None  # values above it take a broker redeploy that raises it (LOCKS_CEILING)
    redeploy: bool = False  # whether such a redeploy is allowed

    @property
    def numeric(self) -> bool:
        return not self.choices

    def candidates(self, now: int | str) -> list[int | str]:
        """The values the tuner may try besides `now`: every choice, or the range's whole numbers (its
        first 64 from the low end, then growing by LADDER, and its high end)."""
        if not self.numeric:
            return [c for c in self.choices if c != now]
        assert self.low is not None and self.high is not None
        values, value = set(range(self.low, min(self.high, self.low + 63) + 1)), float(self.low + 63)
        while value < self.high:
            value *= LADDER
            values.add(min(self.high, round(value)))
        values.add(self.high)
        if self.ceiling is not None and not self.redeploy:
            values = {v for v in values if v <= self.ceiling}
        return sorted(v for v in values if v != now)

    def needs_redeploy(self, to: int | str) -> bool:
        return self.ceiling is not None and int(to) > self.ceiling

    def cost_of(self, now: int | str, to: int | str) -> float:
        if self.numeric:
            return abs(int(to) - int(now)) * self.cost + REDEPLOY_COST * self.needs_redeploy(to)
        return 0.0 if to == now else self.cost

    def redeployed(self, to: int | str) -> "Lever":
        """The lever once the brokers' ceiling was raised to `to` (or as it is, when it needed no raise)."""
        return replace(self, ceiling=int(to)) if self.needs_redeploy(to) else self


def after_step(levers: list[Lever], key: str, to: int | str) -> list[Lever]:
    """The levers once `key` was set to `to` (the brokers' ceiling raised with it, where it had to be)."""
    return [lever.redeployed(to) if lever.key == key else lever for lever in levers]


# key -> (its default range as factors of the workload's value, or its choices; its default cost)
KNOWN: dict[str, tuple[tuple[float, float] | tuple[str, ...], float]] = {
    "consumersPerGroup": ((1, 4), 1.0),
    "consumerProcParallelism": ((1, 8), 0.25),
    f"{SHARE}max.poll.records": ((0.1, 4), 0.0002),
    f"{SHARE}share.acquire.mode": (ACQUIRE_MODES, 0.1),
    LOCKS_KEY: ((0.5, 8), 0.0001),
    BATCH_SIZE_KEY: ((0.25, 1), 0.000001),
}


def parse_lever(
    text: str, now: dict[str, int | str], broker: dict[str, str] | None = None, allow_redeploy: bool = False
) -> Lever:
    """`KEY[=RANGE][@COST]` as a Lever, its default range from the workload's values `now` (the lock
    budget's within the bounds of the brokers' config `broker`, or up to the ceiling only without
    `allow_redeploy`); a DimsterError with one line naming what is wrong and what would be valid."""
    spec, _, cost_text = text.partition("@")
    key, has_range, range_text = spec.partition("=")
    key = key.strip()
    if key not in KNOWN:
        raise DimsterError(
            f"--lever {text}: '{key}' is not a lever the tuner knows{closest(key, KNOWN)}; levers: {', '.join(KNOWN)}"
        )
    default, cost = KNOWN[key]
    lever = _lever(key, default, now[key], cost)
    if has_range:
        lever = _ranged(text, lever, range_text.strip())
    if cost_text:
        try:
            lever = replace(lever, cost=float(cost_text))
        except ValueError:
            raise DimsterError(f"--lever {text}: cost '{cost_text}' is not a number (as {key}@0.5)") from None
        if lever.cost < 0:
            raise DimsterError(f"--lever {text}: a cost is 0 or more")
    if key == LOCKS_KEY:
        lever = _bounded(text, lever, broker or {}, allow_redeploy, explicit=bool(has_range))
    return lever


def _bounded(text: str, lever: Lever, broker: dict[str, str], allow_redeploy: bool, explicit: bool) -> Lever:
    """The lock budget's lever within the brokers' floor, and up to their ceiling unless redeploys are
    allowed; a range the user gave above that ceiling without `--allow-redeploy` is an error."""
    assert lever.low is not None and lever.high is not None
    floor = int(broker.get(LOCKS_FLOOR, KAFKA_LOCKS_BOUNDS[0]))
    ceiling = int(broker.get(LOCKS_CEILING, KAFKA_LOCKS_BOUNDS[1]))
    low, high = max(lever.low, floor), lever.high
    if high > ceiling and not allow_redeploy:
        if explicit:
            raise DimsterError(
                f"--lever {text}: above {ceiling} (the brokers' {LOCKS_CEILING}) takes a broker redeploy; "
                "allow it with --allow-redeploy, or keep the range at most that"
            )
        high = max(ceiling, low)
    return replace(lever, low=min(low, high), high=high, ceiling=ceiling, redeploy=allow_redeploy)


def _lever(key: str, default: tuple, now: int | str, cost: float) -> Lever:
    if isinstance(default[0], str):
        return Lever(key, choices=tuple(default), cost=cost)
    if int(now) < 1:  # consumerProcParallelism -1: the whole poll at once already
        return Lever(key, low=int(now), high=int(now), cost=cost)
    low, high = max(1, int(int(now) * default[0])), max(1, round(int(now) * default[1]))
    return Lever(key, low=min(low, int(now)), high=max(high, int(now)), cost=cost)


def _ranged(text: str, lever: Lever, range_text: str) -> Lever:
    if not lever.numeric:
        chosen = tuple(c.strip() for c in range_text.split(","))
        wrong = [c for c in chosen if c not in lever.choices]
        if wrong or not chosen:
            raise DimsterError(f"--lever {text}: '{', '.join(wrong)}' is not one of {', '.join(lever.choices)}")
        return replace(lever, choices=chosen)
    low_text, dots, high_text = range_text.partition("..")
    try:
        low, high = int(low_text), int(high_text) if dots else int(low_text)
    except ValueError:
        raise DimsterError(f"--lever {text}: the range is whole numbers LOW..HIGH, as {lever.key}=4..32") from None
    if not 1 <= low <= high:
        raise DimsterError(f"--lever {text}: the range needs 1 <= LOW <= HIGH, as {lever.key}=4..32")
    return replace(lever, low=low, high=high)
