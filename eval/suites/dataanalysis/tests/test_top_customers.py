import json

import pandas as pd


def test_top_customers():
    s = pd.read_csv("sales.csv")
    c = pd.read_csv("customers.csv")
    s["revenue"] = s["units"] * s["unit_price"]
    rev = s.groupby("customer_id")["revenue"].sum().sort_values(ascending=False).head(5)
    with open("top_customers.json") as f:
        got = json.load(f)
    assert isinstance(got, list) and len(got) == 5
    for item, (cid, r) in zip(got, rev.items()):
        row = c[c["customer_id"] == cid].iloc[0]
        assert set(item) >= {"customer_id", "name", "segment", "revenue"}
        assert item["customer_id"] == cid
        assert item["name"] == row["name"] and item["segment"] == row["segment"]
        assert abs(float(item["revenue"]) - r) < 0.006
