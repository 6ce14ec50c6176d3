import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

df = pd.read_csv("sales.csv", parse_dates=["date"])
df["revenue"] = df["units"] * df["unit_price"]
monthly = df.groupby(df["date"].dt.to_period("M"))["revenue"].sum().round(2)
out = pd.DataFrame({"month": monthly.index.strftime("%Y-%m"), "revenue": monthly.values})
out.to_csv("monthly_revenue.csv", index=False)
fig, ax = plt.subplots(figsize=(10, 6), dpi=100)
ax.plot(out["month"], out["revenue"], marker="o")
ax.set_title("Monthly revenue")
ax.set_xlabel("month")
ax.set_ylabel("revenue")
ax.grid(True)
fig.tight_layout()
fig.savefig("monthly_revenue.png")
print(out.to_string(index=False))
