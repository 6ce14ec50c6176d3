import pandas as pd


def expected():
    s = pd.read_csv("sales.csv")
    s["revenue"] = s["units"] * s["unit_price"]
    return s.groupby("region")["revenue"].sum().round(2).sort_values(ascending=False)


def test_region_revenue():
    out = pd.read_csv("region_revenue.csv")
    assert list(out.columns) == ["region", "revenue"]
    exp = expected()
    assert list(out["region"]) == list(exp.index), "regions, highest revenue first"
    for got, want in zip(out["revenue"], exp.values):
        assert abs(got - want) < 0.006
