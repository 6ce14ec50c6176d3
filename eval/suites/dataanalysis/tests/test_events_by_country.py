import json
from collections import Counter

import pandas as pd


def test_counts():
    with open("events.json") as f:
        events = json.load(f)
    counts = Counter((e["user"]["country"], e["type"]) for e in events)
    countries = sorted({e["user"]["country"] for e in events})
    out = pd.read_csv("events_by_country.csv")
    assert list(out.columns) == ["country", "view", "click", "purchase", "total"]
    assert list(out["country"]) == countries
    for _, row in out.iterrows():
        for t in ["view", "click", "purchase"]:
            assert row[t] == counts[(row["country"], t)], (row["country"], t)
        assert row["total"] == sum(counts[(row["country"], t)] for t in ["view", "click", "purchase"])
