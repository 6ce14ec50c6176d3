import json
import os

import pandas as pd


def test_numbers():
    s = pd.read_csv("sales.csv")
    s["revenue"] = s["units"] * s["unit_price"]
    exp = s.groupby("region")["revenue"].sum()
    with open("region_bars.json") as f:
        got = json.load(f)
    assert set(got) == set(exp.index)
    for r, v in exp.items():
        assert abs(float(got[r]) - round(v, 2)) < 0.006, r


def test_chart_saved():
    assert os.path.isfile("region_revenue.png")
    with open("region_revenue.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert os.path.getsize("region_revenue.png") > 8_000, "too small to hold a plotted chart"
