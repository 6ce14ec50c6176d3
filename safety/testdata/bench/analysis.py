"""Sales analysis: load the CSV in the workspace, clean it, summarise and plot.

This module is a realistic example of generated data-analysis code. It is used
by the benchmarks and must stay free of findings under the default policy.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Dict, Iterable, List, Optional, Tuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

matplotlib.use("Agg")

DATA_FILE = "sales.csv"
OUTPUT_JSON = "summary.json"
PLOT_FILE = "plot.png"
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


@dataclass
class Summary:
    """Aggregated statistics for one region."""

    region: str
    total: float = 0.0
    count: int = 0
    best_day: Optional[str] = None
    products: Dict[str, int] = field(default_factory=dict)

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def to_dict(self) -> dict:
        return {
            "region": self.region,
            "total": round(self.total, 2),
            "count": self.count,
            "mean": round(self.mean(), 2),
            "best_day": self.best_day,
            "products": dict(sorted(self.products.items())),
        }


class Cleaner:
    """Normalises raw rows: trims strings, parses dates, drops bad amounts."""

    def __init__(self, min_amount: float = 0.0, max_amount: float = 1e6) -> None:
        self.min_amount = min_amount
        self.max_amount = max_amount
        self.rejected: List[Tuple[int, str]] = []

    def __repr__(self) -> str:
        return f"Cleaner(min={self.min_amount}, max={self.max_amount})"

    def parse_date(self, text: str) -> Optional[datetime]:
        match = DATE_RE.match(text.strip())
        if not match:
            return None
        year, month, day = (int(g) for g in match.groups())
        try:
            return datetime(year, month, day)
        except ValueError:
            return None

    def clean(self, df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        df.columns = [c.strip().lower().replace(" ", "_") for c in df.columns]
        for col in df.select_dtypes(include="object").columns:
            df[col] = df[col].astype(str).str.strip()
        df["date"] = pd.to_datetime(df["date"], errors="coerce")
        df["amount"] = pd.to_numeric(df["amount"], errors="coerce")
        mask = df["amount"].between(self.min_amount, self.max_amount)
        for idx in df.index[~mask]:
            self.rejected.append((int(idx), "amount out of range"))
        df = df[mask & df["date"].notna()]
        return df.reset_index(drop=True)


def load(path: str = DATA_FILE) -> pd.DataFrame:
    """Read the CSV, or build a small synthetic frame when it is missing."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        rng = np.random.default_rng(42)
        days = [datetime(2024, 1, 1) + timedelta(days=i) for i in range(90)]
        return pd.DataFrame(
            {
                "date": [d.strftime("%Y-%m-%d") for d in days for _ in range(3)],
                "region": ["north", "south", "west"] * len(days),
                "product": rng.choice(["a", "b", "c", "d"], size=3 * len(days)),
                "amount": rng.gamma(2.0, 50.0, size=3 * len(days)).round(2),
            }
        )


def summarise(df: pd.DataFrame) -> Dict[str, Summary]:
    result: Dict[str, Summary] = {}
    for region, group in df.groupby("region"):
        s = Summary(region=str(region))
        s.total = float(group["amount"].sum())
        s.count = int(len(group))
        daily = group.groupby(group["date"].dt.date)["amount"].sum()
        if not daily.empty:
            s.best_day = str(daily.idxmax())
        s.products = dict(Counter(group["product"]))
        result[s.region] = s
    return result


def moving_average(values: Iterable[float], window: int = 7) -> List[float]:
    values = list(values)
    out: List[float] = []
    acc = 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def zscores(values: np.ndarray) -> np.ndarray:
    std = values.std()
    if std == 0 or math.isnan(std):
        return np.zeros_like(values)
    return (values - values.mean()) / std


def outliers(df: pd.DataFrame, threshold: float = 3.0) -> pd.DataFrame:
    z = zscores(df["amount"].to_numpy())
    return df.loc[np.abs(z) > threshold, ["date", "region", "amount"]]


def weekday_profile(df: pd.DataFrame) -> Dict[str, float]:
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    totals: Dict[str, float] = defaultdict(float)
    for date, amount in zip(df["date"], df["amount"]):
        totals[names[date.weekday()]] += float(amount)
    return {n: round(totals[n], 2) for n in names}


def plot(df: pd.DataFrame, path: str = PLOT_FILE) -> None:
    fig, axes = plt.subplots(2, 1, figsize=(10, 8))
    daily = df.groupby("date")["amount"].sum().sort_index()
    axes[0].plot(daily.index, daily.values, label="daily")
    axes[0].plot(daily.index, moving_average(daily.values), label="7-day mean")
    axes[0].set_title("Daily sales")
    axes[0].legend()
    by_region = df.pivot_table(index="date", columns="region", values="amount", aggfunc="sum")
    by_region.plot(ax=axes[1])
    axes[1].set_title("Sales by region")
    fig.tight_layout()
    plt.savefig(path)
    plt.close(fig)


def fit_trend(df: pd.DataFrame) -> Tuple[float, float]:
    daily = df.groupby("date")["amount"].sum().sort_index()
    x = np.arange(len(daily), dtype=float)
    if len(x) < 2:
        return 0.0, float(daily.sum())
    slope, intercept = np.polyfit(x, daily.to_numpy(), 1)
    return float(slope), float(intercept)


def report(summaries: Dict[str, Summary], trend: Tuple[float, float]) -> str:
    lines = ["Region     Total      Mean  Best day"]
    for name in sorted(summaries):
        s = summaries[name]
        lines.append(f"{name:<10}{s.total:>10.2f}{s.mean():>10.2f}  {s.best_day or '-'}")
    lines.append("Trend: {:+.3f} per day (intercept {:.1f})".format(*trend))
    return "\n".join(lines)


def main() -> int:
    cleaner = Cleaner(min_amount=0.01)
    df = cleaner.clean(load())
    if df.empty:
        print("no valid rows")
        return 1
    summaries = summarise(df)
    trend = fit_trend(df)
    with open(OUTPUT_JSON, "w", encoding="utf-8") as fh:
        json.dump(
            {
                "regions": [s.to_dict() for s in summaries.values()],
                "trend": {"slope": trend[0], "intercept": trend[1]},
                "weekday": weekday_profile(df),
                "outliers": len(outliers(df)),
                "rejected": len(cleaner.rejected),
            },
            fh,
            indent=2,
        )
    plot(df)
    print(report(summaries, trend))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
