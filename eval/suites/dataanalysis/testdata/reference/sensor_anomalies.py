import pandas as pd

df = pd.read_csv("sensors.csv")
stats = df.groupby("sensor_id")["temperature"].agg(["mean", "std"])
df = df.join(stats, on="sensor_id")
flag = (df["temperature"] - df["mean"]).abs() > 3 * df["std"]
out = df.loc[flag, ["sensor_id", "timestamp", "temperature"]].sort_values(["sensor_id", "timestamp"])
out.to_csv("anomalies.csv", index=False)
print(f"{len(out)} anomalies")
print(out.to_string(index=False))
