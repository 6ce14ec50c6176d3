import pandas as pd


def test_filled():
    d = pd.read_csv("sensors.csv")
    out = pd.read_csv("sensors_filled.csv")
    assert list(out.columns) == list(d.columns)
    assert len(out) == len(d)
    assert list(out["sensor_id"]) == list(d["sensor_id"]) and list(out["timestamp"]) == list(d["timestamp"])
    assert out["temperature"].notna().all()
    med = d.groupby("sensor_id")["temperature"].median()
    missing = d["temperature"].isna()
    assert missing.sum() > 0
    for i in d.index:
        want = med[d.at[i, "sensor_id"]] if missing[i] else d.at[i, "temperature"]
        assert abs(out.at[i, "temperature"] - want) < 0.006, d.loc[i].to_dict()
