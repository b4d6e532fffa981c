"""A clock the test holds, for the code under test to read in place of its module `time`: the unit tier
runs niced beside the kafka tier, and a thread of it may wait seconds for a CPU between two lines, so a
test that needs a moment not to have passed yet holds the clock instead of counting on a margin."""


class HeldClock:
    """Stands in for the module `time` of the code under test: `time()` and `monotonic()` read `now`,
    which only the test moves."""

    def __init__(self, now: float):
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now
