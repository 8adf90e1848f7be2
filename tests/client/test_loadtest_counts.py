"""The count check after a load test: separate stores, one shared store, unknown outcomes."""

from __future__ import annotations

from client.loadtest_counts import check_counts

A, B = "127.0.0.1:1", "127.0.0.1:2"


def test_each_address_counted_what_it_accepted() -> None:
    check = check_counts({A: 10, B: 0}, {A: 60, B: 70}, {A: 50, B: 70}, {})
    assert check.ok and check.grew == {A: 50, B: 70}
    assert check.message == "OK: counted exactly the 120 accepted reports across 2 addresses"


def test_replicas_on_one_store_each_show_the_total() -> None:
    check = check_counts({A: 5, B: 5}, {A: 125, B: 125}, {A: 50, B: 70}, {})
    assert check.ok and "share one store" in check.message


def test_reports_of_unknown_outcome_may_or_may_not_be_counted() -> None:
    assert check_counts({A: 0}, {A: 103}, {A: 100}, {A: 5}).ok
    assert not check_counts({A: 0}, {A: 106}, {A: 100}, {A: 5}).ok


def test_a_lost_or_extra_report_is_a_discrepancy() -> None:
    lost = check_counts({A: 0}, {A: 99}, {A: 100}, {})
    assert not lost.ok
    assert lost.message == f"DISCREPANCY: {A} counted 99 more, accepted 100"
    assert not check_counts({A: 0, B: 0}, {A: 51, B: 70}, {A: 50, B: 70}, {}).ok
