import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.lock.budget import (
    MAX_COUNT,
    MAX_NUMBER,
    Budget,
    BudgetError,
    effective_limit,
    explain,
    parse_count,
)

percent = st.integers(min_value=1, max_value=100)
counts = st.integers(min_value=1, max_value=MAX_COUNT)
unknown = st.one_of(st.none(), st.integers(max_value=0))


@pytest.mark.parametrize(
    ("text", "budget"),
    [("3", Budget(3)), ("25%", Budget(25, percent=True)), ("100%", Budget(100, percent=True)),
     ("1%", Budget(1, percent=True)), ("007", Budget(7)), (str(MAX_NUMBER), Budget(MAX_NUMBER))],
    ids=["number", "percent", "all", "one-percent", "leading-zeros", "largest"],
)  # fmt: skip
def test_parse(text: str, budget: Budget) -> None:
    assert Budget.parse(text) == budget
    assert str(Budget.parse(text)) == (text.lstrip("0") or "0")


@pytest.mark.parametrize(
    "text",
    ["", "0", "0%", "101%", "-1", "-5%", "+3", " 3", "3 ", "2.5", "2.5%", "25%%", "%", "x", "1e3", "3n",
     str(MAX_NUMBER + 1), "99999999", "٣"],
)  # fmt: skip
def test_parse_refuses(text: str) -> None:
    with pytest.raises(BudgetError):
        Budget.parse(text)


def test_of_a_config_value() -> None:
    assert Budget.of(4) == Budget(4)
    assert Budget.of("50%") == Budget(50, percent=True)
    assert Budget.of(4).config_value() == 4 and Budget.of("50%").config_value() == "50%"


@pytest.mark.parametrize(
    ("budget", "count", "limit"),
    [(Budget(25, percent=True), 12, 3), (Budget(25, percent=True), 3, 1), (Budget(25, percent=True), 7, 1),
     (Budget(25, percent=True), 8, 2), (Budget(100, percent=True), 5, 5), (Budget(50, percent=True), 1, 1),
     (Budget(33, percent=True), 100, 33), (Budget(3), 2, 3), (Budget(3), None, 3)],
)  # fmt: skip
def test_limit(budget: Budget, count: int | None, limit: int) -> None:
    assert budget.limit(count) == limit


@given(p=percent, count=unknown)
def test_an_unknown_count_allows_one_never_unlimited(p: int, count: int | None) -> None:
    assert Budget(p, percent=True).limit(count) == 1


@given(p=percent, count=counts)
def test_a_percentage_is_never_0_nor_above_the_count(p: int, count: int) -> None:
    assert 1 <= Budget(p, percent=True).limit(count) <= count


@given(p=percent, q=percent, count=counts)
def test_monotonic_in_the_percentage(p: int, q: int, count: int) -> None:
    low, high = sorted((p, q))
    assert Budget(low, percent=True).limit(count) <= Budget(high, percent=True).limit(count)


@given(p=percent, a=counts, b=counts)
def test_monotonic_in_the_count(p: int, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert Budget(p, percent=True).limit(low) <= Budget(p, percent=True).limit(high)


@given(concurrency=st.integers(min_value=-3, max_value=50), p=percent, count=st.none() | counts)
def test_the_lower_wins_and_never_0(concurrency: int, p: int, count: int | None) -> None:
    budget = Budget(p, percent=True)
    limit = effective_limit(concurrency=concurrency, budget=budget, count=count)
    assert limit == min(max(concurrency, 1), budget.limit(count))
    assert 1 <= limit <= max(concurrency, 1)


def test_no_budget_is_concurrency_alone() -> None:
    assert effective_limit(concurrency=5, budget=None, count=None) == 5
    assert effective_limit(concurrency=0, budget=None, count=3) == 1
    assert effective_limit(concurrency=5, budget=Budget(2), count=None) == 2


@pytest.mark.parametrize(
    ("concurrency", "budget", "count", "text"),
    [
        (5, Budget(25, percent=True), 12, "3 (--concurrency 5, --max-unavailable 25% of 12 nodes)"),
        (2, Budget(25, percent=True), 12, "2 (--concurrency 2, --max-unavailable 25% of 12 nodes)"),
        (5, Budget(25, percent=True), None, "1 (--concurrency 5, --max-unavailable 25% of an unknown number "
                                            "of nodes: 1)"),
        (5, Budget(50, percent=True), 1, "1 (--concurrency 5, --max-unavailable 50% of 1 node)"),
        (5, Budget(2), None, "2 (--concurrency 5, --max-unavailable 2)"),
        (3, None, None, "3 (--concurrency 3)"),
    ],
)  # fmt: skip
def test_explain(concurrency: int, budget: Budget | None, count: int | None, text: str) -> None:
    assert explain(concurrency=concurrency, budget=budget, count=count) == text


@pytest.mark.parametrize(
    ("value", "count"),
    [(12, 12), (0, 0), (MAX_COUNT, MAX_COUNT), (MAX_COUNT + 1, None), (-1, None), (True, None), ("12", None),
     (12.0, None), (None, None), ([12], None), ({"n": 1}, None)],
)  # fmt: skip
def test_parse_count_is_total(value: object, count: int | None) -> None:
    assert parse_count(value) == count


@given(value=st.from_type(object))
def test_parse_count_never_raises(value: object) -> None:
    found = parse_count(value)
    assert found is None or 0 <= found <= MAX_COUNT
