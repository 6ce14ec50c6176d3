import json

import pandas as pd

with open("events.json") as f:
    events = pd.json_normalize(json.load(f))
table = pd.crosstab(events["user.country"], events["type"])
table = table.reindex(columns=["view", "click", "purchase"], fill_value=0)
table["total"] = table.sum(axis=1)
table = table.sort_index().reset_index().rename(columns={"user.country": "country"})
table.columns.name = None
table.to_csv("events_by_country.csv", index=False)
print(table.to_string(index=False))
