"""The paper's two figures, each as PNG plus the CSV of exactly what is plotted.

Figure 1 puts strict preference and preferred-passage MRR side by side so the
preference–position divergence is visible at a glance; Figure 2 shows how much of
the remaining error sits in the equal-grade branch. A figure is drawn only when its
data changed: the PNG is kept under the digest of its CSV and of this module.
"""
from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fixtures.artifacts import atomic_write  # noqa: E402
from reports.tie_branch import BRANCHES  # noqa: E402


def figure1_data(table2: pd.DataFrame) -> pd.DataFrame:
    """What Figure 1 plots: per ranker, n, strict and MRR with their intervals, mean ranks, sampled or not."""
    n_max = table2["n"].max()
    data = table2[["ranker", "n", "strict_pct", "mrr", "mean_rank_pos", "mean_rank_neg"]].copy()
    for column in ("strict_pct_lo", "strict_pct_hi", "mrr_lo", "mrr_hi"):
        data[column] = table2[column] if column in table2.columns else np.nan
    numeric = [c for c in data.columns if c != "ranker"]
    data[numeric] = data[numeric].apply(pd.to_numeric, errors="coerce").astype(float)
    data["sampled"] = data["n"] < n_max
    return data


def figure1(data: pd.DataFrame, path: Path) -> None:
    """Strict preference vs MRR, each with its own 95% source-group interval and n; mean ranks of both passages.

    A ranker evaluated on a sample is drawn hollow and labelled with its n, so a 16-direction
    sample never reads as certain as the full population beside it.
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    for i, row in data.reset_index(drop=True).iterrows():
        if not np.isfinite(row["mrr"]):
            continue  # a designated-pair ranker has no position
        xerr = yerr = None
        if np.isfinite(row["strict_pct_lo"]):
            xerr = [[row["strict_pct"] - row["strict_pct_lo"]], [row["strict_pct_hi"] - row["strict_pct"]]]
        if np.isfinite(row["mrr_lo"]):
            yerr = [[row["mrr"] - row["mrr_lo"]], [row["mrr_hi"] - row["mrr"]]]
        style = {"mfc": "none"} if row["sampled"] else {}
        ax1.errorbar(row["strict_pct"], row["mrr"], xerr=xerr, yerr=yerr, fmt="o", capsize=3, color=f"C{i}", **style)
        ax1.annotate(f"{row['ranker']} (n={int(row['n']):,})", (row["strict_pct"], row["mrr"]),
                     textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax1.set_xlabel("strict preference (%), 95% source-group interval")
    ax1.set_ylabel("preferred-passage MRR (full pool), 95% interval")
    ax1.set_title("Preference vs position (hollow: sampled directions)")
    ax1.grid(alpha=0.3)

    ranked = data[np.isfinite(data["mean_rank_pos"].astype(float))].reset_index(drop=True)
    x = np.arange(len(ranked))
    ax2.bar(x - 0.2, ranked["mean_rank_pos"], width=0.4, label="preferred")
    ax2.bar(x + 0.2, ranked["mean_rank_neg"], width=0.4, label="counterpart")
    ax2.set_xticks(x, [f"{r}\nn={int(n):,}" for r, n in zip(ranked["ranker"], ranked["n"])], rotation=30,
                   ha="right", fontsize=7)
    ax2.set_yscale("log")
    ax2.set_ylabel("mean full-pool rank (log)")
    ax2.set_title("Where the designated passages land")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def figure2_data(tie_branch: pd.DataFrame) -> pd.DataFrame:
    """What Figure 2 plots: the three branches of every ranker on a bounded grade scale (argmax grades)."""
    graded = tie_branch.loc[(tie_branch["branch"] == "equal_score") & tie_branch["double_max"].notna(), "scorer"]
    return tie_branch[tie_branch["scorer"].isin(set(graded)) & tie_branch["branch"].isin(BRANCHES)]


def figure2(data: pd.DataFrame, path: Path) -> None:
    """Each branch's share of directions vs of non-successes, with the double-max share of ties."""
    scorers = list(dict.fromkeys(data["scorer"]))
    columns = min(3, len(scorers))
    rows = -(-len(scorers) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(scorers):]:
        ax.set_visible(False)
    for ax, scorer in zip(axes.flat, scorers):
        part = data[data["scorer"] == scorer].reset_index(drop=True)
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["directions_pct"], width=0.4, label="share of directions")
        ax.bar(x + 0.2, part["non_successes_pct"], width=0.4, label="share of non-successes")
        ax.set_xticks(x, [b.replace("_", " ") for b in part["branch"]], rotation=15)
        ax.set_ylabel("%")
        eq = part[part["branch"] == "equal_score"]
        note = ""
        if len(eq) and pd.notna(eq["double_max_pct"].iloc[0]):
            note = f"; both max grade in {eq['double_max_pct'].iloc[0]:.1f}% of ties"
        ax.set_title(f"{scorer}: equal vs different scores{note}", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


#: (file stem, table it comes from, what it plots, how it is drawn)
FIGURES: tuple[tuple[str, str, Callable[[pd.DataFrame], pd.DataFrame], Callable[[pd.DataFrame, Path], None]], ...] = (
    ("figure1", "table2", figure1_data, figure1),
    ("figure2", "tie_branch", figure2_data, figure2),
)


def write_figures(out_dir: Path, tables: dict[str, pd.DataFrame], cache_dir: Path | None = None) -> list[Path]:
    """Whichever figures this run's tables support: CSV of the plotted data, and the PNG (from the cache when
    the same data was drawn before by the same code)."""
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    out = []
    for stem, table, select, draw in FIGURES:
        if table not in tables or not len(tables[table]):
            continue
        data = select(tables[table])
        if not len(data):
            continue
        csv = out_dir / f"{stem}.csv"
        data.to_csv(csv, index=False)
        png = out_dir / f"{stem}.png"
        cached = None
        if cache_dir is not None:
            key = hashlib.sha256(csv.read_bytes() + code.encode()).hexdigest()[:24]
            cached = Path(cache_dir) / f"{stem}-{key}.png"
        if cached is not None and cached.is_file():
            shutil.copyfile(cached, png)
        else:
            draw(data, png)
            if cached is not None:
                atomic_write(cached, lambda p: shutil.copyfile(png, p))
        out.append(png)
    return out
