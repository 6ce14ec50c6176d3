import pandas as pd

df = pd.read_csv("sensors.csv")
missing = int(df["temperature"].isna().sum())
df["temperature"] = df["temperature"].fillna(df.groupby("sensor_id")["temperature"].transform("median"))
df.to_csv("sensors_filled.csv", index=False)
print(f"filled {missing} missing values")
