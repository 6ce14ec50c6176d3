import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["unit_price"]
rev = df.groupby("region")["revenue"].sum().round(2)
with open("region_bars.json", "w") as f:
    json.dump({k: float(v) for k, v in rev.items()}, f, indent=2)
fig, ax = plt.subplots(figsize=(8, 5))
bars = ax.bar(rev.index, rev.values, color="steelblue")
for b, v in zip(bars, rev.values):
    ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:,.2f}", ha="center", va="bottom")
ax.set_title("Revenue per region")
ax.set_xlabel("region")
ax.set_ylabel("revenue")
fig.tight_layout()
fig.savefig("region_revenue.png")
print(rev.to_string())
