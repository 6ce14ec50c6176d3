import pandas as pd

df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["unit_price"]
out = df.groupby("region", as_index=False)["revenue"].sum().sort_values("revenue", ascending=False)
out["revenue"] = out["revenue"].round(2)
out.to_csv("region_revenue.csv", index=False)
print(out.to_string(index=False))
