import json


def test_purchases():
    with open("events.json") as f:
        events = [e for e in json.load(f) if e["type"] == "purchase"]
    rev, buyers = {}, {}
    for e in events:
        c = e["user"]["country"]
        rev[c] = rev.get(c, 0) + e["amount"]
        buyers.setdefault(c, set()).add(e["user"]["id"])
    with open("country_purchases.json") as f:
        got = json.load(f)
    assert isinstance(got, dict) and set(got) == set(rev)
    for c in rev:
        assert abs(float(got[c]["revenue"]) - round(rev[c], 2)) < 0.006, c
        assert int(got[c]["buyers"]) == len(buyers[c]), c
