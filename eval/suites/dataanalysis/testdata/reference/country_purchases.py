import json

with open("events.json") as f:
    events = json.load(f)
result = {}
for e in events:
    if e["type"] != "purchase":
        continue
    c = result.setdefault(e["user"]["country"], {"revenue": 0.0, "users": set()})
    c["revenue"] += e["amount"]
    c["users"].add(e["user"]["id"])
out = {k: {"revenue": round(v["revenue"], 2), "buyers": len(v["users"])} for k, v in sorted(result.items())}
with open("country_purchases.json", "w") as f:
    json.dump(out, f, indent=2)
print(json.dumps(out, indent=2))
