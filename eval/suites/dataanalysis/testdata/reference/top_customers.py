import json

import pandas as pd

sales = pd.read_csv("sales.csv")
customers = pd.read_csv("customers.csv")
sales["revenue"] = sales["units"] * sales["unit_price"]
totals = sales.groupby("customer_id", as_index=False)["revenue"].sum()
top = totals.merge(customers, on="customer_id").sort_values("revenue", ascending=False).head(5)
items = [{"customer_id": r.customer_id, "name": r.name, "segment": r.segment, "revenue": round(float(r.revenue), 2)}
         for r in top.itertuples()]
with open("top_customers.json", "w") as f:
    json.dump(items, f, indent=2)
print(json.dumps(items, indent=2))
