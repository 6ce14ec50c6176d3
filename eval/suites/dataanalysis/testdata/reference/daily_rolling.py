import pandas as pd

df = pd.read_csv("sales.csv", parse_dates=["date"])
df["revenue"] = df["units"] * df["unit_price"]
daily = df.set_index("date")["revenue"].resample("D").sum()
out = pd.DataFrame({
    "date": daily.index.strftime("%Y-%m-%d"),
    "revenue": daily.round(2).values,
    "rolling_7d": daily.rolling(7).mean().round(2).values,
})
out.to_csv("daily_revenue.csv", index=False)
print(out.tail(10).to_string(index=False))
