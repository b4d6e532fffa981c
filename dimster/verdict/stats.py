"""The one-sided Mann-Whitney U test, with numpy only (scipy is a 40 MB wheel for one function).

U counts the pairs (x, y) with x above y, a tie counting one half. Small samples without ties get
the exact p from the distribution of U over all orderings of the two samples, which a short
recursion counts; the others get the normal approximation with the tie and continuity corrections.
A level of samples can only decide when its smallest reachable p, 1 / C(n1 + n2, n1), is below alpha:
3 a side never can at 0.05 (1/20), 3 and 4 can (1/35)."""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EXACT_UP_TO = 20  # n1 + n2 at most this, and no ties: the exact distribution


@dataclass(frozen=True)
class UTest:
    u: float  # pairs with x above y (ties count 1/2)
    p_greater: float  # one-sided p that x tends to lie above y
    p_less: float  # one-sided p that x tends to lie below y
    exact: bool


def smallest_p(n1: int, n2: int) -> float:
    """The smallest one-sided p any two samples of these sizes can reach."""
    return 1.0 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0


def repeats_needed(alpha: float) -> int:
    """Samples a side that can tell a difference at this alpha (4 at 0.05)."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


@functools.cache
def u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the C(n1 + n2, n1) orderings of n1 x's and n2 y's give U = 0, 1, ... n1 * n2. The
    top value is an x (above all n2 y's: U gains n2) or a y (U gains nothing)."""
    if n1 == 0 or n2 == 0:
        return (1,)
    counts = [0] * (n1 * n2 + 1)
    for u, count in enumerate(u_counts(n1 - 1, n2)):
        counts[u + n2] += count
    for u, count in enumerate(u_counts(n1, n2 - 1)):
        counts[u] += count
    return tuple(counts)


def mann_whitney(x: Sequence[float], y: Sequence[float], exact_up_to: int = EXACT_UP_TO) -> UTest:
    """Both one-sided tests of x against y; each sample needs at least one value."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(xs), len(ys)
    if not n1 or not n2:
        raise ValueError("the Mann-Whitney U test needs a value on each side")
    values, inverse, ties = np.unique(np.concatenate([xs, ys]), return_inverse=True, return_counts=True)
    # average rank of each distinct value: the ranks before it, plus the middle of its own run
    average = np.cumsum(ties) - (ties - 1) / 2.0
    u = float(average[inverse[:n1]].sum() - n1 * (n1 + 1) / 2)
    if n1 + n2 <= exact_up_to and len(values) == n1 + n2:
        counts, total = u_counts(n1, n2), math.comb(n1 + n2, n1)
        k = round(u)
        return UTest(u, sum(counts[k:]) / total, sum(counts[: k + 1]) / total, exact=True)
    n = n1 + n2
    variance = n1 * n2 / 12.0 * ((n + 1) - float((ties**3 - ties).sum()) / (n * (n - 1)))
    if variance <= 0:  # every value the same: nothing to tell
        return UTest(u, 1.0, 1.0, exact=False)
    sigma, mean = math.sqrt(variance), n1 * n2 / 2.0
    return UTest(
        u,
        _upper_tail((u - mean - 0.5) / sigma),
        _upper_tail((mean - u - 0.5) / sigma),
        exact=False,
    )


def _upper_tail(z: float) -> float:
    """P(Z >= z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))
