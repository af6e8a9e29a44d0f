"""The paper's two figures, each as PNG plus the CSV of exactly what is plotted.

Figure 1 puts strict preference and preferred-passage MRR side by side so the
preference–position divergence is visible at a glance; Figure 2 shows how much of
the remaining error sits in the equal-grade branch. A figure is drawn only when its
data changed: the PNG is kept under the digest of its CSV and of this module, sealed with
the user's key (``fixtures.artifacts``); a kept PNG that is a link, or not sealed with the key
(planted in a shared cache), is named in a warning and drawn again, never published
(docs/reproducibility.md#sharing-a-cache).
"""
from __future__ import annotations

import os
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, atomic_write, discard, read_sealed, write_sealed
from fixtures.identity import bytes_digest, sha256_file
from reports.hypotheses import format_interval
from reports.measures import column
from reports.tables import interval_note
from reports.tie_branch import BRANCHES

if TYPE_CHECKING:
    from matplotlib.figure import Figure


#: Characters per line of a ranker's label in a legend or tick label, so long labels wrap instead of overlapping.
WRAP = 38
MARKERS = "osD^v<>ph*XP"
#: Figure 1's Table II columns (``reports.measures``): preference (x) against position (y), each with its 95%
#: interval's two columns, and the mean full-pool ranks of the preferred and the counterpart passage (bars).
PREFERENCE, POSITION = column("strict_pct"), column("mrr")
RANKS = (column("mean_rank_pos"), column("mean_rank_neg"))


def _labels(table2: pd.DataFrame) -> pd.Series:
    """Each ranker's declared label (the writer's ``label`` column), its name where none is given."""
    names = table2["ranker"].astype(str)
    if "label" not in table2.columns:
        return names
    return table2["label"].where(table2["label"].notna() & (table2["label"].astype(str) != ""), names).astype(str)


def figure1_data(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """What Figure 1 plots: per ranker that places passages in the full pool (a designated-pair ranker has no MRR and
    no rank, so it is not plotted), its label, n, strict and MRR with their intervals, mean ranks, sampled or not, and
    whether its intervals are unreliable (``reports.tables.interval_note``). Empty when no ranker has an MRR: there
    is then no Figure 1."""
    table2 = tables["table2"]
    data = table2[["ranker", "n", PREFERENCE.name, POSITION.name, *(m.name for m in RANKS)]].copy()
    bounds = (*PREFERENCE.bounds, *POSITION.bounds)
    for name in bounds:
        data[name] = table2[name] if name in table2.columns else np.nan
    numeric = [c for c in data.columns if c != "ranker"]
    data[numeric] = data[numeric].apply(pd.to_numeric, errors="coerce").astype(float)
    data.insert(1, "label", _labels(table2).to_numpy())
    data["sampled"] = data["n"] < table2["n"].max()
    data["interval_note"] = [interval_note(n, lo, hi) or interval_note(n, mlo, mhi) for n, lo, hi, mlo, mhi in zip(
        data["n"], *(data[b] for b in bounds))]
    return data[np.isfinite(data[POSITION.name])].reset_index(drop=True)


def ranker_tick(ranker: str, label: str, n: float) -> str:
    """A ranker as a tick or legend label: its label wrapped, then its name (when it differs) and n."""
    name = "" if label == ranker else f"{ranker}, "
    return f"{textwrap.fill(label, WRAP)}\n({name}n={int(n):,})"


def figure1(data: pd.DataFrame, path: Path) -> None:
    """Figure 1 drawn (``draw_figure1``) and saved as PNG."""
    _save(draw_figure1(data), path)


def figure2(data: pd.DataFrame, path: Path) -> None:
    """Figure 2 drawn (``draw_figure2``) and saved as PNG."""
    _save(draw_figure2(data), path)


def _pyplot() -> ModuleType:
    """matplotlib's pyplot on the file-only Agg backend, imported when a figure is drawn."""
    import matplotlib  # only to draw: a warm run copies cached PNGs
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"), which must come first
    return plt


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=150)
    _pyplot().close(fig)


def _error_bar(value: float, lo: float, hi: float) -> list[list[float]] | None:
    """An interval as matplotlib's error bar around ``value``: None without one (NaN), and no negative arm where the
    estimate lies outside its percentile interval (a degenerate interval's rounding, or a skewed bootstrap):
    that arm is drawn as zero, and the table beside the figure keeps the interval as computed."""
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(value)):
        return None
    return [[max(value - lo, 0.0)], [max(hi - value, 0.0)]]


def draw_figure1(data: pd.DataFrame) -> Figure:
    """Strict preference vs MRR, each with its own 95% source-group interval and n; mean ranks of both passages.

    Rankers are told apart by marker and colour with their labels and n in a legend, never by text placed
    beside a point, so nearby points cannot make labels overlap; rankers drawn at the same point say so. A
    ranker evaluated on a sample is drawn hollow, so a 4-direction sample never reads as certain as the full
    population beside it.
    """
    rows = max(len(data), 1)
    fig, (ax1, ax2) = _pyplot().subplots(1, 2, figsize=(13, 4.6 + 0.55 * rows), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.1, 1]})
    seen: dict[tuple[float, float], str] = {}
    (x, (x_lo, x_hi)), (y, (y_lo, y_hi)) = ((m.name, m.bounds) for m in (PREFERENCE, POSITION))
    for i, row in data.iterrows():
        xerr, yerr = _error_bar(row[x], row[x_lo], row[x_hi]), _error_bar(row[y], row[y_lo], row[y_hi])
        style = {"mfc": "none", "mew": 1.5} if row["sampled"] else {}
        key = (round(float(row[x]), 6), round(float(row[y]), 6))
        text = ranker_tick(row["ranker"], row["label"], row["n"])
        if row["interval_note"]:
            text += " interval unreliable"
        if key in seen:
            text += f"; same point as {seen[key]}"
        seen.setdefault(key, str(row["ranker"]))
        ax1.errorbar(row[x], row[y], xerr=xerr, yerr=yerr, fmt=MARKERS[i % len(MARKERS)], capsize=3,
                     color=f"C{i % 10}", ms=7 + 3 * (key in seen and seen[key] != row["ranker"]), label=text, **style)
    ax1.set_xlabel("strict preference (%), 95% source-group interval")
    ax1.set_ylabel("preferred-passage MRR (full pool), 95% interval")
    ax1.set_title("Preference vs position (hollow: sampled directions)")
    ax1.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncol=2, fontsize=7, frameon=False)

    at = np.arange(len(data))
    for m, side, shift in zip(RANKS, ("preferred", "counterpart"), (-0.2, 0.2)):
        ax2.barh(at + shift, data[m.name], height=0.4, label=side)
    ax2.set_yticks(at, [ranker_tick(r, lab, n) for r, lab, n in zip(data["ranker"], data["label"], data["n"])],
                   fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xscale("log")
    ax2.set_xlabel("mean full-pool rank (log)")
    ax2.set_title("Where the designated passages land")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3, axis="x")
    return fig


def figure2_data(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """What Figure 2 plots: the three branches of every ranker on a bounded grade scale (argmax grades), with its
    label, and its H3 claim's effect (share of non-successes minus share of directions in the equal-grade branch),
    95% source-group interval, n and whether that interval is unreliable."""
    tie_branch = tables["tie_branch"]
    graded = tie_branch.loc[(tie_branch["branch"] == "equal_score") & tie_branch["double_max"].notna(), "scorer"]
    data = tie_branch[tie_branch["scorer"].isin(set(graded)) & tie_branch["branch"].isin(BRANCHES)].copy()
    labels = dict(zip(tables["table2"]["ranker"].astype(str), _labels(tables["table2"]))) \
        if "table2" in tables else {}
    data.insert(1, "label", [labels.get(str(s), str(s)) for s in data["scorer"]])
    claims = tables.get("claims")
    h3 = {}
    if claims is not None and {"family", "measure", "ranker", "effect"} <= set(claims.columns):
        rows = claims[(claims["measure"] == "tie_branch_share") & claims["family"].astype(str).str.startswith("H3")]
        h3 = {str(r["ranker"]): r for r in rows.to_dict("records")}
    for field in ("effect", "lo", "hi", "n"):
        data[f"h3_{field}"] = [float(h3[s][field]) if s in h3 and pd.notna(h3[s][field]) else np.nan
                               for s in data["scorer"].astype(str)]
    data["h3_interval_note"] = [interval_note(n, lo, hi) for n, lo, hi in zip(data["h3_n"], data["h3_lo"],
                                                                              data["h3_hi"])]
    return data


def draw_figure2(data: pd.DataFrame) -> Figure:
    """Each branch's share of directions vs of non-successes (counts on the bars, n in the title), with the
    double-max share of ties and the H3 effect with its interval (and its note when unreliable)."""
    scorers = list(dict.fromkeys(data["scorer"]))
    columns = min(3, len(scorers))
    rows = -(-len(scorers) // columns)
    fig, axes = _pyplot().subplots(rows, columns, figsize=(5.8 * columns, 4.6 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(scorers):]:
        ax.set_visible(False)
    for ax, scorer in zip(axes.flat, scorers):
        part = data[data["scorer"] == scorer].reset_index(drop=True)
        x = np.arange(len(part))
        bars = ax.bar(x - 0.2, part["directions_pct"], width=0.4, label="share of directions")
        ax.bar_label(bars, [f"{int(d)}/{int(o)}" for d, o in zip(part["directions"], part["of_directions"])],
                     fontsize=7)
        bars = ax.bar(x + 0.2, part["non_successes_pct"], width=0.4, label="share of non-successes")
        ax.bar_label(bars, [f"{int(d)}/{int(o)}" for d, o in zip(part["non_successes"], part["of_non_successes"])],
                     fontsize=7)
        ax.set_xticks(x, [b.replace("_", " ") for b in part["branch"]], rotation=15, fontsize=8)
        ax.set_ylabel("% (bars: count / of)")
        ax.set_ylim(0, 118)
        first = part.iloc[0]
        lines = [textwrap.fill(str(first["label"]), 48),
                 f"{scorer}: n={int(first['of_directions']):,} directions, {int(first['of_non_successes']):,} "
                 "non-successes"]
        eq = part[part["branch"] == "equal_score"]
        if len(eq) and pd.notna(eq["double_max_pct"].iloc[0]):
            lines.append(f"both max grade in {eq['double_max_pct'].iloc[0]:.1f}% of ties")
        if np.isfinite(first["h3_effect"]):
            note = f" {first['h3_interval_note']}" if first["h3_interval_note"] else ""
            lines.append(f"H3 equal-grade excess {first['h3_effect']:+.2f} pts "
                         f"{format_interval(first['h3_lo'], first['h3_hi'])}{note}")
        ax.set_title("\n".join(lines), fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


#: (file stem, table it needs, what it plots from the tables, how it is drawn)
FIGURES: tuple[tuple[str, str, Callable[[dict[str, pd.DataFrame]], pd.DataFrame],
                     Callable[[pd.DataFrame, Path], None]], ...] = (
    ("figure1", "table2", figure1_data, figure1),
    ("figure2", "tie_branch", figure2_data, figure2),
)


class FigureCacheWarning(UserWarning):
    """A kept figure was refused (a link, altered, or not sealed with this user's key) and is drawn again."""


def _kept(path: Path) -> bytes | None:
    """A kept PNG's bytes as sealed with the user's key, or None (drawn again): one that fails is named."""
    if not os.path.lexists(path):
        return None
    try:
        return read_sealed(path, "kept figure")
    except (ArtifactCorrupt, OSError) as exc:
        warnings.warn(FigureCacheWarning(f"{exc}; drawn again, not published"), stacklevel=3)
        discard(path)
        return None


def write_figures(out_dir: Path, tables: dict[str, pd.DataFrame], cache_dir: Path | None = None) -> list[Path]:
    """Whichever figures this run's tables support: CSV of the plotted data, and the PNG (from the cache when
    the same data was drawn before by the same code, and its seal verifies under the user's key)."""
    code = sha256_file(Path(__file__))
    out = []
    for stem, table, select, draw in FIGURES:
        if table not in tables or not len(tables[table]):
            continue
        data = select(tables)
        if not len(data):
            continue
        csv = out_dir / f"{stem}.csv"
        data.to_csv(csv, index=False)
        png = out_dir / f"{stem}.png"
        cached = None
        if cache_dir is not None:
            key = bytes_digest(csv.read_bytes() + code.encode())[:24]
            cached = Path(cache_dir) / f"{stem}-{key}.png"
        kept = _kept(cached) if cached is not None else None
        if kept is not None:
            atomic_write(png, lambda p, kept=kept: p.write_bytes(kept))
        else:
            draw(data, png)
            if cached is not None:
                drawn = png.read_bytes()
                write_sealed(cached, lambda p, drawn=drawn: p.write_bytes(drawn))
        out.append(png)
    return out
