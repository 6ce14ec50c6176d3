import pandas as pd


def test_daily_revenue():
    s = pd.read_csv("sales.csv", parse_dates=["date"])
    s["revenue"] = s["units"] * s["unit_price"]
    days = pd.date_range(s["date"].min(), s["date"].max(), freq="D")
    daily = s.groupby("date")["revenue"].sum().reindex(days, fill_value=0)
    roll = daily.rolling(7).mean()
    out = pd.read_csv("daily_revenue.csv", dtype={"date": str})
    assert list(out.columns) == ["date", "revenue", "rolling_7d"]
    assert list(out["date"]) == [d.strftime("%Y-%m-%d") for d in days]
    assert (daily.values == 0).any(), "the data has days without orders"
    for got, want in zip(out["revenue"], daily.values):
        assert abs(got - want) < 0.006
    assert out["rolling_7d"].iloc[:6].isna().all()
    for got, want in zip(out["rolling_7d"].iloc[6:], roll.values[6:]):
        assert abs(got - want) < 0.006
