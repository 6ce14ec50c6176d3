import json

import pandas as pd

df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["unit_price"]
total = float(df["revenue"].sum())
summary = {
    "total_orders": int(len(df)),
    "total_units": int(df["units"].sum()),
    "total_revenue": round(total, 2),
    "unique_customers": int(df["customer_id"].nunique()),
    "best_region": str(df.groupby("region")["revenue"].sum().idxmax()),
    "best_product": str(df.groupby("product")["units"].sum().idxmax()),
    "average_order_value": round(total / len(df), 2),
    "first_order_date": str(df["date"].min()),
    "last_order_date": str(df["date"].max()),
}
with open("summary.json", "w") as f:
    json.dump(summary, f, indent=2)
print(json.dumps(summary, indent=2))
