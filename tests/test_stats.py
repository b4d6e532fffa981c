"""The one-sided Mann-Whitney U test of verdict/stats.py against brute force: every way of choosing
which of the pooled values are the x's is equally likely when x and y come from one distribution,
so P(U >= u) is the share of those choices whose U is at least u."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dimster.verdict.stats import mann_whitney, repeats_needed, smallest_p

pytestmark = pytest.mark.unit


def u_of(x: list[float], y: list[float]) -> float:
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def brute_force(x: list[float], y: list[float]) -> tuple[float, float]:
    """(P(U >= u), P(U <= u)) over every split of the pooled values into n1 x's and the rest."""
    pooled, n1, u = [*x, *y], len(x), u_of(x, y)
    us = []
    for chosen in itertools.combinations(range(len(pooled)), n1):
        xs = [pooled[i] for i in chosen]
        ys = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        us.append(u_of(xs, ys))
    return sum(v >= u for v in us) / len(us), sum(v <= u for v in us) / len(us)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n1: st.tuples(
            st.just(n1),
            st.lists(st.integers(-1000, 1000), min_size=n1 + 1, max_size=n1 + 6, unique=True),
        )
    )
)
def test_the_exact_p_is_the_share_of_orderings_as_extreme(case: tuple[int, list[int]]) -> None:
    n1, values = case
    x, y = [float(v) for v in values[:n1]], [float(v) for v in values[n1:]]
    test = mann_whitney(x, y)
    assert test.exact
    assert test.u == u_of(x, y)
    greater, less = brute_force(x, y)
    assert test.p_greater == pytest.approx(greater, abs=1e-12)
    assert test.p_less == pytest.approx(less, abs=1e-12)


def test_known_values_of_the_exact_distribution() -> None:
    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]).p_less == pytest.approx(1 / 70)
    assert mann_whitney([5, 6, 7, 8], [1, 2, 3, 4]).p_greater == pytest.approx(1 / 70)
    assert mann_whitney([1, 2, 3], [4, 5, 6]).p_less == pytest.approx(1 / 20)
    assert mann_whitney([1, 2, 3], [4, 5, 6]).p_greater == 1.0


def test_the_smallest_reachable_p_says_how_many_repeats_can_decide() -> None:
    assert smallest_p(3, 3) == pytest.approx(0.05)  # not below alpha 0.05: 3 a side cannot tell
    assert smallest_p(3, 4) == pytest.approx(1 / 35)
    assert smallest_p(4, 4) == pytest.approx(1 / 70)
    assert smallest_p(1, 1) == 0.5 and smallest_p(0, 5) == 1.0
    assert repeats_needed(0.05) == 4
    assert repeats_needed(0.01) == 5  # 1/252


@pytest.mark.parametrize("n1,n2", [(8, 9), (10, 10), (6, 14)])
def test_the_normal_approximation_is_close_to_the_exact_p_at_moderate_sizes(n1: int, n2: int) -> None:
    rng = random.Random(n1 * 100 + n2)
    for shift in (0.0, 0.3, 0.7, 1.2):
        x = [rng.gauss(shift, 1.0) for _ in range(n1)]
        y = [rng.gauss(0.0, 1.0) for _ in range(n2)]
        exact, approx = mann_whitney(x, y), mann_whitney(x, y, exact_up_to=0)
        assert exact.exact and not approx.exact
        assert approx.p_greater == pytest.approx(exact.p_greater, abs=0.01)
        assert approx.p_less == pytest.approx(exact.p_less, abs=0.01)


def test_ties_use_the_normal_approximation_with_the_tie_correction() -> None:
    rng = random.Random(7)
    x = [float(rng.randint(0, 4)) for _ in range(7)]
    y = [float(rng.randint(1, 5)) for _ in range(8)]
    test = mann_whitney(x, y)
    assert not test.exact and test.u == u_of(x, y)
    greater, less = brute_force(x, y)  # the exact distribution given the ties: 6,435 splits
    assert test.p_greater == pytest.approx(greater, abs=0.02)
    assert test.p_less == pytest.approx(less, abs=0.02)


def test_a_large_shift_over_many_samples_is_significant_and_none_is_not() -> None:
    rng = random.Random(1)
    base = [rng.gauss(10.0, 1.0) for _ in range(300)]
    slower = [rng.gauss(12.0, 1.0) for _ in range(300)]
    same = [rng.gauss(10.0, 1.0) for _ in range(300)]
    assert mann_whitney(slower, base).p_greater < 1e-10
    assert mann_whitney(slower, base).p_less > 0.99
    assert 0.01 < mann_whitney(same, base).p_greater < 0.99
    assert mann_whitney([3.0] * 5, [3.0] * 6).p_greater == 1.0  # all tied: nothing to tell
    with pytest.raises(ValueError, match="needs a value on each side"):
        mann_whitney([], [1.0])
    assert math.isclose(mann_whitney([2.0], [1.0]).p_greater, 0.5)
