"""Publishing one split's results: the single step that writes ``results/<split>/``.

Everything is written into a staging folder beside the results and swapped in whole when
complete, so a run killed at any point leaves the previous complete results (or, for
the instant of the swap, none) — never a mix of old and new files. An interrupted pytest
session publishes nothing. Files: CSV + JSON per table, ``table2.tex``, ``report.md``,
figures with their data, ``manifest.json``, and the contract files other tools read:
``qrels.txt``, ``runs/<ranker>.trec``, ``pool.parquet``, ``directions.csv`` (SPEC §5).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from reports.figures import write_figures
from reports.paper import paper_table2
from reports.tables import TABLES, directions_table
from reports.trec import write_qrels

#: Columns shown in the terminal and in report.md for the wide tables.
BRIEF_COLUMNS = {
    "table2": ["ranker", "n", "strict", "strict_pct", "paired_pct", "mrr", "pref_at_1", "pref_at_10",
               "mean_rank_pos", "mean_rank_neg", "ties", "fallback", "delta_pts", "delta_lo", "delta_hi"],
    "claims": ["claim", "status", "expected", "measured"],
}
#: Tables that are bookkeeping, not results: they go into manifest.json, not into CSV files.
INTERNAL = ("manifest", "stages", "artifacts")
#: pytest's exit code of an interrupted session (Ctrl-C): nothing is published then.
INTERRUPTED = 2


class PublishError(RuntimeError):
    """The results of a split could not be published; the previous results are left as they were."""


def _brief(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in BRIEF_COLUMNS.get(table, list(frame.columns)) if c in frame.columns]
    return frame[cols]


def terminal_tables(table: str, frame: pd.DataFrame) -> str:
    """Fixed-width text of a table for the pytest terminal summary."""
    return _brief(table, frame).to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–",
                                          max_colwidth=110)


def _fmt(value: object, digits: int) -> str:
    return "--" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _ci(value: object, lo: object, hi: object, digits: int) -> str:
    if value is None or pd.isna(value):
        return "--"
    if lo is None or pd.isna(lo):
        return _fmt(value, digits)
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def table2_latex(frame: pd.DataFrame, split: str, profile: str, commit: str) -> str:
    """Table II as a booktabs table with readable headers, n per row, intervals and a caption."""
    def col(row: pd.Series, name: str) -> object:
        return row[name] if name in row.index else None

    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{lrrrrrrr}", r"\toprule",
             r"Ranker & $n$ & Strict (\%) & Paired (\%) & MRR & Pref@1 (\%) & Ties & $\Delta$ strict (pts) \\",
             r"\midrule"]
    for _, row in frame.iterrows():
        name = str(row["ranker"]).replace("_", r"\_")
        lines.append(" & ".join([
            name, f"{int(row['n']):,}",
            _ci(row["strict_pct"], col(row, "strict_pct_lo"), col(row, "strict_pct_hi"), 2),
            _ci(row["paired_pct"], col(row, "paired_pct_lo"), col(row, "paired_pct_hi"), 2),
            _ci(row["mrr"], col(row, "mrr_lo"), col(row, "mrr_hi"), 4),
            _fmt(row["pref_at_1"], 2), f"{int(row['ties'])}",
            _ci(row["delta_pts"], row["delta_lo"], row["delta_hi"], 2)]) + r" \\")
    caption = (f"Preference and position on NevIR {split} (profile {profile}, commit {commit}). "
               r"Intervals: 95\% source-group bootstrap (2,000 resamples); $\Delta$ strict against the ranker's "
               r"reference on the same $n$ directions.")
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{caption}}}", f"\\label{{tab:table2-{split}}}",
              r"\end{table}", ""]
    return "\n".join(lines)


def _manifest(tables: dict[str, pd.DataFrame], context: dict[str, Any]) -> dict[str, Any]:
    manifest: dict[str, Any] = {}
    if "manifest" in tables:
        manifest.update(dict(zip(tables["manifest"]["key"], tables["manifest"]["value"])))
    if "stages" in tables:
        manifest["stages_wall_clock"] = {r["stage"]: {k: v for k, v in r.items() if k != "stage" and pd.notna(v)}
                                         for r in tables["stages"].to_dict("records")}
    if "artifacts" in tables:
        manifest["artifacts"] = dict(zip(tables["artifacts"]["artifact"], tables["artifacts"]["path"]))
    manifest["run_id"] = context.get("run_id")
    manifest["pytest_exit_status"] = context.get("exitstatus")
    return manifest


def _artifact(tables: dict[str, pd.DataFrame], name: str) -> Path | None:
    if "artifacts" not in tables:
        return None
    paths = dict(zip(tables["artifacts"]["artifact"], tables["artifacts"]["path"]))
    return Path(paths[name]) if name in paths else None


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _report_md(split: str, tables: dict[str, pd.DataFrame], figures: list[Path], manifest: dict[str, Any]) -> str:
    lines = [f"# Preference Is Not Position — {split}", "",
             f"Profile `{manifest.get('profile', {}).get('name', '?')}`, commit `{manifest.get('code_commit', '?')}`, "
             f"run `{manifest.get('run_id')}`.", ""]
    if "claims" in tables:
        lines += ["## Claims", "", _brief("claims", tables["claims"]).to_markdown(index=False), ""]
    lines += ["## Files", "",
              "- `table1.csv` populations; `table2.csv` one row per ranker (contract columns, then intervals); "
              "`table3.csv` pair-only vs window; `tie_branch.csv`; `pairwise.csv`; `cost.csv`; `claims.csv`",
              "- `qrels.txt`, `runs/<ranker>.trec` (full pool, final order), `pool.parquet`, `directions.csv` "
              "(one row per planned direction, per-ranker outcomes)",
              "- `table2.tex` (booktabs), figures as PNG with the plotted data as CSV, `manifest.json` (code, data, "
              "models, seeds, samples, stage wall-clock)", ""]
    for name, (title, _, _) in TABLES.items():
        if name in tables and name not in INTERNAL and name != "claims":
            lines += [f"## {title}", "", _brief(name, tables[name]).to_markdown(index=False, floatfmt=".4g"), ""]
    paper = paper_table2(split, int(tables["table2"]["n"].max()) if "table2" in tables else None)
    if paper is not None:
        lines += ["## Reference: the paper's published Table II (not this run)", "",
                  "Values reported in the text of *Preference Is Not Position* (Test; GPU models: text-embedding-v4, "
                  "doubao sparse, BGE-reranker-v2-m3, Qwen3-14B-AWQ); blank where the text does not report them.", "",
                  paper.to_markdown(index=False, floatfmt=".4g"), ""]
    for fig in figures:
        lines += [f"![{fig.stem}]({fig.name})", ""]
    return "\n".join(lines)


def _write(out: Path, split: str, tables: dict[str, pd.DataFrame], context: dict[str, Any]) -> None:
    manifest = _manifest(tables, context)
    for name, frame in tables.items():
        if name in INTERNAL:
            continue
        frame.to_csv(out / f"{name}.csv", index=False)
        frame.to_json(out / f"{name}.json", orient="records", indent=1)
    if "table2" in tables:
        profile = manifest.get("profile", {}).get("name", "?")
        (out / "table2.tex").write_text(table2_latex(tables["table2"], split, profile,
                                                     str(manifest.get("code_commit", "?"))), encoding="utf-8")
    population = _artifact(tables, "population")
    if population is not None:
        annotated = pd.read_parquet(population)
        write_qrels(annotated, out / "qrels.txt")
        rankers = list(tables["table2"]["ranker"]) if "table2" in tables else []
        outcomes = {r: pd.read_parquet(p) for r in rankers if (p := _artifact(tables, f"outcomes:{r}")) is not None}
        directions_table(annotated, outcomes).to_csv(out / "directions.csv", index=False)
    pool = _artifact(tables, "pool")
    if pool is not None:
        _link_or_copy(pool, out / "pool.parquet")
    for artifact in (tables["artifacts"]["artifact"] if "artifacts" in tables else []):
        if artifact.startswith("run:"):
            _link_or_copy(_artifact(tables, artifact), out / "runs" / f"{artifact[4:]}.trec")
    figures = write_figures(out, tables, context.get("figure_cache"))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str), encoding="utf-8")
    (out / "report.md").write_text(_report_md(split, tables, figures, manifest), encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(results_dir: Path, split: str) -> None:
    """Clean up after a publisher that was killed: restore its previous results if the swap was cut short,
    and remove its half-written staging folder."""
    final = Path(results_dir) / split
    for kind in ("previous", "staging"):
        for path in sorted(Path(results_dir).glob(f".{kind}-{split}-*")):
            pid = path.name.rsplit("-", 1)[-1]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if kind == "previous" and not final.exists():
                path.rename(final)
            else:
                shutil.rmtree(path, ignore_errors=True)


def publish(results_dir: Path, split: str, tables: dict[str, pd.DataFrame], context: dict[str, Any]) -> Path:
    """Write a split's results into a staging folder and swap it in whole; returns ``results/<split>``."""
    results_dir = Path(results_dir)
    final = results_dir / split
    if context.get("exitstatus") == INTERRUPTED:
        raise PublishError(f"{split}: the run was interrupted; {final} keeps the previous complete results")
    recover(results_dir, split)
    staging = results_dir / f".staging-{split}-{os.getpid()}"
    previous = results_dir / f".previous-{split}-{os.getpid()}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        _write(staging, split, tables, context)
        if final.exists():
            final.rename(previous)
        staging.rename(final)
    except (OSError, ValueError, KeyError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if previous.exists() and not final.exists():
            previous.rename(final)
        raise PublishError(f"{split}: publishing into {results_dir} failed ({type(exc).__name__}: {exc}); "
                           f"{final} keeps the previous results") from exc
    shutil.rmtree(previous, ignore_errors=True)
    return final
