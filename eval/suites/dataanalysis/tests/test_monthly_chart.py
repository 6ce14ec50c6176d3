import os
import struct

import pandas as pd


def test_monthly_totals():
    s = pd.read_csv("sales.csv", parse_dates=["date"])
    s["revenue"] = s["units"] * s["unit_price"]
    exp = s.groupby(s["date"].dt.strftime("%Y-%m"))["revenue"].sum()
    out = pd.read_csv("monthly_revenue.csv", dtype={"month": str})
    assert list(out.columns) == ["month", "revenue"]
    assert list(out["month"]) == list(exp.index)
    for got, want in zip(out["revenue"], exp.values):
        assert abs(got - want) < 0.006


def test_chart_saved():
    assert os.path.isfile("monthly_revenue.png")
    with open("monthly_revenue.png", "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    assert width >= 800 and height >= 500, (width, height)
    assert os.path.getsize("monthly_revenue.png") > 10_000, "too small to hold a plotted chart"
