"""A bar chart of a small table with seaborn, saved as plot.png in the
workspace: the README's example of a program that needs a package the
sandbox does not have (codeagent exec --require seaborn==0.13.2)."""
import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sales = pd.DataFrame({"region": ["north", "south", "east", "west"], "revenue": [120, 95, 143, 88]})
ax = sns.barplot(data=sales, x="region", y="revenue")
ax.figure.savefig("plot.png")
print("wrote plot.png:", len(sales), "bars")
