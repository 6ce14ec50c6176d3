import json

import pandas as pd


def test_category_margin():
    s = pd.read_csv("sales.csv")
    with open("products.json") as f:
        p = pd.DataFrame(json.load(f))
    m = s.merge(p, left_on="product", right_on="name")
    assert len(m) == len(s)
    m["revenue"] = m["units"] * m["unit_price"]
    m["cost"] = m["units"] * m["unit_cost"]
    exp = m.groupby("category")[["revenue", "cost"]].sum().sort_index()
    exp["margin"] = exp["revenue"] - exp["cost"]
    out = pd.read_csv("category_margin.csv")
    assert list(out.columns) == ["category", "revenue", "cost", "margin"]
    assert list(out["category"]) == list(exp.index)
    for col in ["revenue", "cost", "margin"]:
        for got, want in zip(out[col], exp[col]):
            assert abs(got - want) < 0.011, col
