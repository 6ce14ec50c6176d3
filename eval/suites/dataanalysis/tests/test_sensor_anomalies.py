import pandas as pd


def test_anomalies():
    d = pd.read_csv("sensors.csv")
    g = d.groupby("sensor_id")["temperature"]
    z = (d["temperature"] - g.transform("mean")).abs() > 3 * g.transform("std")
    exp = d[z].sort_values(["sensor_id", "timestamp"])
    assert len(exp) >= 5
    out = pd.read_csv("anomalies.csv")
    assert list(out.columns) == ["sensor_id", "timestamp", "temperature"]
    assert list(zip(out["sensor_id"], out["timestamp"])) == list(zip(exp["sensor_id"], exp["timestamp"]))
    for got, want in zip(out["temperature"], exp["temperature"]):
        assert abs(got - want) < 0.006
