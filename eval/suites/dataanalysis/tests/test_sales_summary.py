import json

import pandas as pd
import pytest


@pytest.fixture(scope="module")
def summary():
    with open("summary.json") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def sales():
    s = pd.read_csv("sales.csv")
    s["revenue"] = s["units"] * s["unit_price"]
    return s


def test_fields(summary):
    assert set(summary) == {"total_orders", "total_units", "total_revenue", "unique_customers", "best_region",
                            "best_product", "average_order_value", "first_order_date", "last_order_date"}


def test_counts(summary, sales):
    assert summary["total_orders"] == len(sales)
    assert summary["total_units"] == int(sales["units"].sum())
    assert summary["unique_customers"] == sales["customer_id"].nunique()


def test_money(summary, sales):
    assert abs(summary["total_revenue"] - round(sales["revenue"].sum(), 2)) < 0.006
    assert abs(summary["average_order_value"] - round(sales["revenue"].sum() / len(sales), 2)) < 0.006


def test_best(summary, sales):
    assert summary["best_region"] == sales.groupby("region")["revenue"].sum().idxmax()
    assert summary["best_product"] == sales.groupby("product")["units"].sum().idxmax()


def test_dates(summary, sales):
    assert summary["first_order_date"] == sales["date"].min()
    assert summary["last_order_date"] == sales["date"].max()
