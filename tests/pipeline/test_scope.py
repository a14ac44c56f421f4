"""The audit's scope: ``--groups``/``--topics`` keep whole-name matches, ``--exclude-groups``/``--exclude-topics``
then leave whole-name matches out (Java regular expressions through Spark's ``rlike``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from audit.pipeline import AuditConfig, in_scope

ROWS = [
    ("payments-eu", "orders"),
    ("payments-eu", "orders.v2"),
    ("old-payments-eu", "orders"),
    ("payments-test", "orders"),
    ("billing", "payments"),
]


def _scope(spark, **kw) -> set[tuple[str, str]]:
    df = spark.createDataFrame(ROWS, "group_id string, topic string")
    cfg = AuditConfig(log_dirs=["d"], output="o", **kw)
    return {(r.group_id, r.topic) for r in in_scope(df, cfg).collect()}


def test_include_and_exclude_match_whole_names(spark):
    assert _scope(spark) == set(ROWS)
    assert _scope(spark, groups="payments-.*") == {
        ("payments-eu", "orders"),
        ("payments-eu", "orders.v2"),
        ("payments-test", "orders"),
    }
    assert _scope(spark, groups="payments-.*", exclude_groups=".*-test") == {
        ("payments-eu", "orders"),
        ("payments-eu", "orders.v2"),
    }
    assert _scope(spark, exclude_topics="orders") == {("payments-eu", "orders.v2"), ("billing", "payments")}
    assert _scope(spark, topics="orders.*", exclude_topics=r"orders\.v2", exclude_groups="old-.*|billing") == {
        ("payments-eu", "orders"),
        ("payments-test", "orders"),
    }


def test_a_bad_exclude_pattern_names_its_flag():
    with pytest.raises(ValidationError, match="--exclude-topics is not a valid regular expression"):
        AuditConfig(log_dirs=["d"], output="o", exclude_topics="orders(")
