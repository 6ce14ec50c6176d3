import pandas as pd


def test_clean():
    raw = pd.read_csv("customers_raw.csv")
    key = raw["email"].str.strip().str.lower()
    exp = raw[~key.duplicated()]
    out = pd.read_csv("customers_clean.csv")
    assert list(out.columns) == ["customer_id", "name", "email"]
    assert len(exp) < len(raw)
    assert list(out["customer_id"]) == list(exp["customer_id"])
    assert list(out["email"]) == list(exp["email"].str.strip().str.lower())
    assert list(out["name"]) == list(exp["name"].str.strip())
