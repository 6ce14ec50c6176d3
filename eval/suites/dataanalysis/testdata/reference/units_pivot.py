import pandas as pd

df = pd.read_csv("sales.csv", parse_dates=["date"])
df["month"] = df["date"].dt.strftime("%Y-%m")
pivot = df.pivot_table(index="product", columns="month", values="units", aggfunc="sum", fill_value=0)
pivot = pivot.sort_index().sort_index(axis=1)
pivot.columns.name = None
pivot.reset_index().to_csv("units_pivot.csv", index=False)
print(pivot.to_string())
