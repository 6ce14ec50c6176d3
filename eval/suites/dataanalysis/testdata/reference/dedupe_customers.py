import pandas as pd

df = pd.read_csv("customers_raw.csv")
df["email"] = df["email"].str.strip().str.lower()
df["name"] = df["name"].str.strip()
clean = df.drop_duplicates(subset="email", keep="first")
clean[["customer_id", "name", "email"]].to_csv("customers_clean.csv", index=False)
print(f"removed {len(df) - len(clean)} duplicates")
