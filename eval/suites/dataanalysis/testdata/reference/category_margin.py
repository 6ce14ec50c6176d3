import json

import pandas as pd

sales = pd.read_csv("sales.csv")
with open("products.json") as f:
    products = pd.DataFrame(json.load(f))
df = sales.merge(products[["name", "category", "unit_cost"]], left_on="product", right_on="name", how="left")
df["revenue"] = df["units"] * df["unit_price"]
df["cost"] = df["units"] * df["unit_cost"]
out = df.groupby("category", as_index=False)[["revenue", "cost"]].sum().sort_values("category")
out["margin"] = out["revenue"] - out["cost"]
out = out.round(2)
out.to_csv("category_margin.csv", index=False)
print(out.to_string(index=False))
