import pandas as pd


def test_pivot():
    s = pd.read_csv("sales.csv", parse_dates=["date"])
    s["month"] = s["date"].dt.strftime("%Y-%m")
    exp = s.pivot_table(index="product", columns="month", values="units", aggfunc="sum", fill_value=0).sort_index()
    out = pd.read_csv("units_pivot.csv")
    assert list(out.columns) == ["product"] + list(exp.columns)
    assert list(out["product"]) == list(exp.index)
    for m in exp.columns:
        assert list(out[m].astype(int)) == list(exp[m].astype(int)), m
