"""Publishing a run's results: the single step that writes ``results/<split>/``, for every split at once.

A run is published as one transaction (docs/protocol.md#publishing). Every split is written
into ``<root>/.runs/<run id>/<split>/`` first; then one atomic rename repoints the
``<root>/.current`` symlink at that folder, and ``<root>/<split>`` are symlinks to
``.current/<split>``. So whatever stops the process (an exception, SIGINT, SIGTERM, SIGKILL,
a full disk), every split under ``<root>`` comes from one complete run: the previous one,
or this one. A SIGINT or SIGTERM while staging is deferred to the next checkpoint, which
abandons the staged run. Published files are independent copies, checked against the seals
of the cached artifacts they come from, and ``manifest.json`` lists the sha256 of every other
published file. Files: CSV + JSON per table, ``table2.tex``, ``report.md``, figures with
their data, ``manifest.json``, and the contract files other tools read: ``qrels.txt``,
``runs/<ranker>.trec``, ``pool.parquet``, ``directions.csv`` (docs/protocol.md#outputs).
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from filelock import Timeout

from fixtures.artifacts import ArtifactCorrupt, check_seal, seal_path, sha256_file
from fixtures.reference import published_paired
from reports.explore import write_explore
from reports.figures import write_figures
from reports.hypotheses import DIGITS, format_interval, format_p
from reports.measures import COUNT, PAIRED_MEASURES, POPULATION, BaselineMeasure, Measure, Output, shown_in
from reports.paper import paper_table2
from reports.reference import CAVEAT, beside_published
from reports.sequential import StoppingPoint, stopping_points
from reports.tables import RELIABLE_N, TABLES, directions_table, interval_note
from rankers.trec import write_qrels
from reports.transaction import RUNS, StagedRun, current_run  # RUNS: where readers of the results find the runs

#: Columns shown in the terminal and in report.md for the wide tables (Table II's: those its registry shows there).
BRIEF_COLUMNS = {
    "table2": ["ranker", *(m.name for m in shown_in("brief"))],
    "claims": ["claim", "status", "expected", "measured"],
}
#: Tables that are bookkeeping, not results: they go into manifest.json, not into CSV files.
INTERNAL = ("manifest", "stages", "artifacts")
#: pytest's exit code of an interrupted session (Ctrl-C): nothing is published then.
INTERRUPTED = 2
#: Under a results root, apart from the transaction's own files (``reports.transaction``): the separate root of
#: runs that did not compute every output.
PARTIAL = "partial"
#: LaTeX's special characters and what stands for each in text.
TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}

#: Markdown's characters that could start markup (code, emphasis, links, raw HTML) or end a table cell (``|``);
#: each is backslash-escaped in a text report.md shows, so the text reads as it is.
MD_SPECIAL = frozenset("\\`*_[]<>|")


class PublishError(RuntimeError):
    """The run could not be published; every split keeps the previous complete results."""


class PublishInterrupted(PublishError):
    """SIGINT or SIGTERM arrived before the swap: the staged run was abandoned."""


def _brief(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in BRIEF_COLUMNS.get(table, list(frame.columns)) if c in frame.columns]
    return frame[cols]


def terminal_tables(table: str, frame: pd.DataFrame) -> str:
    """Fixed-width text of a table for the pytest terminal summary."""
    return _brief(table, frame).to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–",
                                          max_colwidth=110)


def unavailable_summary(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``unavailable`` table as ranker -> scope -> inputs, unavailable, causes (cause -> count), replies_capped."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in frame.to_dict("records"):
        entry = out.setdefault(str(row["ranker"]), {}).setdefault(str(row["scope"]), {
            "inputs": int(row["inputs"]), "unavailable": 0, "causes": {}, "replies_capped": 0})
        if row["issue"] == "capped":
            entry["replies_capped"] += int(row["count"])
        else:
            entry["unavailable"] += int(row["count"])
            entry["causes"][str(row["cause"])] = int(row["count"])
    return out


def unavailable_lines(frame: pd.DataFrame) -> list[str]:
    """One line per ranker and scope with unavailable judgments or capped replies, causes counted, e.g.
    ``oa (window): 16 of 80 judgments unavailable — 16 ConnectError to 127.0.0.1:8011``."""
    lines = []
    for ranker, scopes in unavailable_summary(frame).items():
        for scope, entry in scopes.items():
            parts = []
            if entry["unavailable"]:
                causes = "; ".join(f"{n:,} {cause}" for cause, n in entry["causes"].items())
                parts.append(f"{entry['unavailable']:,} of {entry['inputs']:,} judgments unavailable — {causes}")
            if entry["replies_capped"]:
                rows = frame[(frame["ranker"] == ranker) & (frame["scope"] == scope) & (frame["issue"] == "capped")]
                parts.append(f"{entry['replies_capped']:,} replies {rows['cause'].iloc[0]}")
            lines.append(f"{ranker} ({scope}): " + "; ".join(parts))
    return lines


def endpoint_summary_of(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``endpoints`` table as ranker -> scope -> endpoint -> judgments, resent, taken_out (reason or None)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in frame.to_dict("records"):
        reason = row.get("taken_out")
        out.setdefault(str(row["ranker"]), {}).setdefault(str(row["scope"]), {})[str(row["endpoint"])] = {
            "judgments": int(row["judgments"]), "resent": int(row["resent"]),
            "taken_out": None if reason is None or pd.isna(reason) else str(reason)}
    return out


def endpoint_lines(frame: pd.DataFrame) -> list[str]:
    """One line per ranker and scope, e.g. ``g (window): 30 judgments made now — 16 http://127.0.0.1:8011/v1, 14 ...;
    taken out: http://127.0.0.1:8012/v1 (3 requests re-sent: RemoteProtocolError ...)``."""
    lines = []
    for ranker, scopes in endpoint_summary_of(frame).items():
        for scope, endpoints in scopes.items():
            total = sum(e["judgments"] for e in endpoints.values())
            made = ", ".join(f"{e['judgments']:,} {url}" for url, e in endpoints.items() if e["judgments"])
            line = f"{ranker} ({scope}): {total:,} judgments made now — {made or 'none'}"
            out = [f"{url} ({e['resent']:,} requests re-sent: {e['taken_out']})" for url, e in endpoints.items()
                   if e["taken_out"] is not None]
            lines.append(line + (f"; **taken out**: {'; '.join(out)}" if out else ""))
    return lines


def _fmt(value: object, digits: int) -> str:
    return "--" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _ci(value: object, lo: object, hi: object, digits: int, n: object = None) -> str:
    """``value [lo, hi]``, with ``interval_note``'s note when the interval cannot be read as one."""
    if value is None or pd.isna(value):
        return "--"
    if lo is None or pd.isna(lo):
        return _fmt(value, digits)
    note = interval_note(n, lo, hi)
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" + (f" {note}" if note else "")


def declared_rankers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The profile's ranker declarations recorded in the manifest (name -> options), {} when absent."""
    rankers = (manifest.get("profile") or {}).get("rankers") if isinstance(manifest.get("profile"), dict) else None
    return {str(k): v for k, v in rankers.items() if isinstance(v, dict)} if isinstance(rankers, dict) else {}


def with_labels(table2: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """Table II with each ranker's declared ``label`` (its name when none is declared) and the ``compare_to``
    baseline its Δ is against (blank where it has no Δ) as the last columns, after the contract and intervals."""
    declared = declared_rankers(manifest)
    out = table2.copy()
    names = out["ranker"].astype(str)
    out["label"] = [str(declared.get(r, {}).get("label") or r) for r in names]
    if "compare_to" not in out.columns:
        delta = out["delta_pts"] if "delta_pts" in out.columns else pd.Series(float("nan"), index=out.index)
        out["compare_to"] = [str(declared.get(r, {}).get("compare_to") or "") if pd.notna(d) else ""
                             for r, d in zip(names, delta)]
    return out


def _label_of(tables: dict[str, pd.DataFrame], manifest: dict[str, Any]) -> dict[str, str]:
    """ranker -> label, from Table II's ``label`` column or else the manifest's declarations."""
    labels = {r: str(d.get("label") or r) for r, d in declared_rankers(manifest).items()}
    if "table2" in tables and "label" in tables["table2"].columns:
        labels.update(zip(tables["table2"]["ranker"].astype(str), tables["table2"]["label"].astype(str)))
    return labels


def md_escape(text: object) -> str:
    """``text`` as Markdown text on one line (a table cell or prose): every ``MD_SPECIAL`` character escaped."""
    return "".join("\\" + ch if ch in MD_SPECIAL else ch for ch in " ".join(str(text).split()))


def md_code(text: object) -> str:
    """``text`` as a Markdown code span in prose, on one line: fenced by more backticks than any run it holds."""
    flat = " ".join(str(text).split())
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", flat)), default=0))
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _md_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell as Markdown text (``md_escape``); numbers and the suite's own headers as they
    are."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = [md_escape(v) if isinstance(v, str) else v for v in out[column]]
    return out


def tex_escape(text: object) -> str:
    """``text`` as LaTeX text: every special character (``& % $ # _ { } ~ ^ \\``) stands for itself."""
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in str(text))


def _with_baseline(columns: tuple[Measure, ...]) -> list[Measure | None]:
    """``columns`` with None (the row's ``compare_to`` baseline) before the first column comparing with it."""
    first = next((i for i, m in enumerate(columns) if isinstance(m, BaselineMeasure)), len(columns))
    return [*columns[:first], *([None] if first < len(columns) else []), *columns[first:]]


def _heading(m: Measure, output: Output) -> str:
    """A column's heading in report.md or LaTeX, saying when its interval is shown."""
    if output == "latex":
        return m.tex or tex_escape(m.label)
    return f"{m.label} [95% CI]" if m.bounds is not None and output not in m.bare else m.label


def _cell(m: Measure, row: dict[str, Any], output: Output) -> str:
    """A Table II value as an output shows it: with its interval (and note) where shown, a population with thousands
    separators, a count whole, a rate or mean with its record's digits; ``--`` when missing."""
    value = row.get(m.name)
    if m.bounds is not None and output not in m.bare:
        lo, hi = m.bounds
        return _ci(value, row.get(lo), row.get(hi), m.digits, row.get("n"))
    if value is None or pd.isna(value):
        return "--"
    if m.unit == POPULATION:
        return f"{int(value):,}"
    return f"{int(value)}" if m.unit == COUNT else _fmt(value, m.digits)


def table2_latex(frame: pd.DataFrame, split: str, profile: str, commit: str) -> str:
    """Table II as a booktabs table with readable headers, n per row, intervals, each row's Δ baseline and label,
    and a caption naming split, profile and commit; the columns are those the registry shows in LaTeX."""
    def text(row: dict[str, Any], name: str, default: object = "") -> str:
        value = row.get(name)
        return tex_escape(value if value is not None and pd.notna(value) and value != "" else default)

    columns = _with_baseline(shown_in("latex"))
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "".join("l" if m is None else "r" for m in columns) + r"p{4cm}}", r"\toprule",
             " & ".join(["Ranker", *("Baseline" if m is None else _heading(m, "latex") for m in columns), "Label"])
             + r" \\",
             r"\midrule"]
    for row in frame.to_dict("records"):
        lines.append(" & ".join([
            tex_escape(row["ranker"]),
            *(text(row, "compare_to") if m is None else tex_escape(_cell(m, row, "latex")) for m in columns),
            text(row, "label", row["ranker"]),
        ]) + r" \\")
    caption = (f"Preference and position on NevIR {tex_escape(split)} (profile {tex_escape(profile)}, commit "
               f"{tex_escape(commit)}). "
               r"Intervals: 95\% source-group bootstrap (2,000 resamples), marked unreliable over fewer than "
               f"{RELIABLE_N} directions or when of zero width. "
               r"$\Delta$ strict: each row against its own \texttt{compare\_to} baseline (column Baseline; rows "
               r"may have different baselines), paired on that row's $n$ directions.")
    label = "".join(ch if ch.isalnum() else "-" for ch in split)
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{caption}}}", f"\\label{{tab:table2-{label}}}",
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
    manifest["not_evaluated"] = list(context.get("not_evaluated", []))
    manifest["unavailable"] = unavailable_summary(tables["unavailable"]) if "unavailable" in tables else {}
    manifest["endpoints"] = endpoint_summary_of(tables["endpoints"]) if "endpoints" in tables else {}
    manifest["partial"] = list(context.get("partial", []))
    return manifest


def _artifact(tables: dict[str, pd.DataFrame], name: str) -> Path | None:
    if "artifacts" not in tables:
        return None
    paths = dict(zip(tables["artifacts"]["artifact"], tables["artifacts"]["path"]))
    return Path(paths[name]) if name in paths else None


def _copy_sealed(source: Path, target: Path) -> None:
    """An independent copy of a sealed cache artifact, refused unless its bytes are those the seal records."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    sealed = seal_path(source)
    expected = sealed.read_text(encoding="utf-8").strip() if sealed.is_file() else None
    actual = sha256_file(target)
    if actual != expected:
        raise ArtifactCorrupt(source, expected, actual, "cached result file")


def _read_sealed(path: Path) -> pd.DataFrame:
    check_seal(path, "cached result file")
    return pd.read_parquet(path)


#: Verdict sections of report.md: the study's families, then every other family (beyond the paper, declared).
FAMILY_TITLES = {"H1": "H1: preference is not position (the profile's declared comparisons)",
                 "H2": "H2: window reranking against each ranker's compare_to baseline",
                 "H3": "H3: the equal-grade branch holds more of the failures than of the directions",
                 "beyond": "Beyond the paper (and claims of no study family)"}
#: How a claim's measure reads in a sentence: a paired measure's words, and H3's share.
MEASURE_WORDS = {**{m.name: m.words for m in PAIRED_MEASURES if m.words},
                 "tie_branch_share": "equal-grade branch, share of non-successes minus share of directions"}


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float("nan") if value is None or pd.isna(value) else float(value)


def _section(family: str) -> str:
    base = str(family).split(":")[0]
    return base if base in ("H1", "H2", "H3") else "beyond"


def verdict_sentence(row: dict[str, Any], labels: dict[str, str], stop: StoppingPoint | None = None) -> str:
    """One claim in words: status, what is compared, effect with its interval (and its note), n, and why; for a claim
    on a sequential sample (``stop``), where the sample stopped (docs/statistics.md#sequential-samples)."""
    stopped = f" The {md_escape(stop.words())}." if stop is not None else ""
    ranker, versus = str(row.get("ranker") or ""), str(row.get("versus") or "")
    if pd.isna(row.get("versus")):
        versus = ""
    def who(name: str) -> str:
        return f"{md_code(name)} ({md_escape(labels[name])})" if labels.get(name, name) != name else md_code(name)
    measure = MEASURE_WORDS.get(str(row.get("measure")), str(row.get("measure")))
    if str(row.get("family", "")).startswith("H3x"):
        measure += f" on the equal-grade directions of {md_code(versus)}"
    subject = f"{who(ranker)} vs {md_code(versus)}, {measure}" if versus else f"{who(ranker)}, {measure}"
    unit = str(row.get("unit") or "")
    digits = DIGITS.get(unit, 2)
    effect, lo, hi, n = _num(row, "effect"), _num(row, "lo"), _num(row, "hi"), _num(row, "n")
    if pd.isna(effect):
        measured = md_escape(row.get("measured", ""))
        return (f"- **{md_escape(row['status'])}** — {subject}: {measured}"
                f"{'.' if stopped and not measured.endswith('.') else ''}{stopped}")
    note = interval_note(n, lo, hi)
    groups = _num(row, "n_groups")
    size = f"n = {int(n):,} directions" + ("" if pd.isna(groups) else
                                            f" in {int(groups):,} source group{'' if groups == 1 else 's'}")
    p, q = _num(row, "p_adjusted"), _num(row, "p_opposite_adjusted")
    if pd.isna(p):
        why = "unable to decide: too few source groups for any outcome to reach α, so it is left out of its family"
    else:
        why = f"Holm-adjusted one-sided p {format_p(p)} on the claimed side, {format_p(q)} on the other"
        if row["status"] == "inconclusive":
            mde, needed = _num(row, "mde"), _num(row, "directions_needed")
            if pd.notna(mde):
                why += f"; MDE {mde:.{digits}f} {unit}"
            if pd.notna(needed):
                why += f"; about {int(needed):,} directions would give 80% power at this effect"
    family = str(row.get("family", ""))
    own = f" (family {family})" if ":" in family else ""
    return (f"- **{md_escape(row['status'])}** — {subject}: {effect:+.{digits}f} {unit} "
            f"{format_interval(lo, hi, digits)}"
            f"{' ' + note if note else ''} (claimed {row.get('claimed')}), {size}{own}; {why}.{stopped}")


def _rows_checked(claims: pd.DataFrame, check: str) -> list[dict[str, Any]]:
    """claims.csv rows whose expectation, gate or pin came out as ``check`` (the ``check`` column)."""
    if "check" not in claims.columns:
        return []
    return [r for r in claims.to_dict("records") if r.get("check") == check]


def _measured(row: dict[str, Any]) -> str:
    return md_escape(" ".join(str(row.get("measured", "")).split()))


def lost_expectations(claims: pd.DataFrame) -> list[str]:
    """Claims the profile reviewed as decisive (holds / fails) that this run left inconclusive, one line each."""
    lost = [r for r in _rows_checked(claims, "undecided") if r.get("family") not in ("gate", "pin")]
    return [f"{md_code(r['claim'])} was reviewed as **{r['expected']}** ({md_code(r['declared_in'])}) but is "
            f"inconclusive now: {_measured(r)}" for r in lost]


def undecidable_on_subset(claims: pd.DataFrame) -> list[str]:
    """Full-run expectations a subset run cannot decide, one line each (docs/statistics.md#expectations)."""
    return [f"{md_code(r['claim'])}: {md_code(r['declared_in'])} expects **{r['expected']}** (reviewed on the full "
            f"run); not decidable on this subset: {_measured(r)}" for r in _rows_checked(claims, "not decidable on this subset")]


def inherited_misses(claims: pd.DataFrame) -> list[str]:
    """Checks the run's profile inherits (a study's pins, expectations and gates) that this run missed, each with
    what it means for the run's comparisons (docs/statistics.md#inherited-checks)."""
    lines = []
    for r in _rows_checked(claims, "missed"):
        if r.get("declaration") != "inherited":
            continue
        source, name = md_code(r["declared_in"]), md_code(r["claim"])
        if r.get("family") == "pin":
            ranker = md_code(r["ranker"])
            lines.append(f"the study's ranker {ranker} moved ({name} pinned at {md_escape(r['expected'])} in "
                         f"{source}; {_measured(r)}): comparisons against {ranker} are against the moved ranker")
        elif r.get("family") == "gate":
            lines.append(f"{name} of {source} fails (measured {_measured(r)}); inherited, so reported, not gating")
        else:
            names = [str(r[k]) for k in ("ranker", "versus") if isinstance(r.get(k), str) and r[k]]
            lines.append(f"the study's claim {name} now **{r['status']}** where {source} records **{r['expected']}**: "
                         f"{' or '.join(md_code(n) for n in names)} moved, so comparisons against "
                         f"{'it' if len(names) == 1 else 'them'} are against the moved ranker ({_measured(r)})")
    return lines


def verdict_lines(claims: pd.DataFrame, labels: dict[str, str],
                  stops: dict[str, StoppingPoint] | None = None) -> list[str]:
    """report.md's opening: per family (H1, H2, H3, beyond the paper) its tally and each claim in a sentence, a claim
    on a sequential sample with its stopping point (``stops``: claim -> point, from sequential.csv)."""
    stops = stops or {}
    rows = [r for r in claims.to_dict("records") if str(r.get("family")) not in ("gate", "pin")]
    for r in rows:
        r["family"] = "" if r.get("family") is None or pd.isna(r.get("family")) else str(r["family"])
    single = [r for r in rows if str(r.get("estimand") or "").startswith("single seed")]
    rows = [r for r in rows if r not in single]
    lines = ["## Verdicts", ""]
    if not rows:
        return lines + ["No hypothesis claim was measured in this run.", ""]
    for section, title in FAMILY_TITLES.items():
        members = [r for r in rows if _section(r["family"]) == section]
        if not members:
            continue
        counts = {s: sum(r["status"] == s for r in members) for s in ("holds", "fails", "inconclusive")}
        lines += [f"### {title}", "",
                  f"Of {len(members)} claims: {counts['holds']} hold, {counts['fails']} fail, "
                  f"{counts['inconclusive']} inconclusive (not decided by this run).", "",
                  *[verdict_sentence(r, labels, stops.get(str(r["claim"]))) for r in members], ""]
    if single:
        lines += ["### The same claims on one training seed (the paper's protocol)", "",
                  "Claims about a training procedure are decided above on outcomes averaged over its training seeds "
                  "(`seeds.csv` has each seed's values); the run's seed alone, decided in its own Holm family, is "
                  "reported here and never asserted.", "", *[verdict_sentence(r, labels) for r in single], ""]
    return lines


def table2_markdown(table2: pd.DataFrame, labels: dict[str, str]) -> str:
    """Table II for report.md: label beside each ranker, then every column the registry shows there, a rate with its
    interval (and note), and the row's own baseline (``Δ vs``) before the Δ columns."""
    out = []
    for row in table2.to_dict("records"):
        name = str(row["ranker"])
        shown = {"ranker": md_escape(name), "label": md_escape(labels.get(name, name))}
        for m in _with_baseline(shown_in("report")):
            if m is None:
                baseline = row.get("compare_to")
                shown["Δ vs"] = "" if baseline is None or pd.isna(baseline) else md_escape(baseline)
            else:
                shown[_heading(m, "report")] = _cell(m, row, "report")
        out.append(shown)
    return pd.DataFrame(out).to_markdown(index=False, disable_numparse=True)


def gates_and_pins_lines(claims: pd.DataFrame) -> list[str]:
    """Gates and pins in one line each when all hold; those that failed or moved listed in full."""
    lines = ["## Gates and pins", ""]
    kinds = (("gate", ("holds",), "gates hold", "gates fail"),
             ("pin", ("unchanged", "holds"), "pins hold (unchanged within their margins)",
              "pins moved (changed or undetermined)"))
    for family, held, kept, moved_words in kinds:
        rows = claims[claims["family"] == family] if "family" in claims.columns else claims.iloc[:0]
        if not len(rows):
            continue
        moved = rows[~rows["status"].isin(held)]
        if not len(moved):
            lines += [f"All {len(rows)} {kept}.", ""]
            continue
        lines += [f"{len(moved)} of {len(rows)} {moved_words}:", "",
                  _md_frame(moved[["claim", "status", "expected", "measured"]]).to_markdown(index=False), ""]
    return lines if len(lines) > 2 else []


def _with_label_column(frame: pd.DataFrame, key: str, labels: dict[str, str]) -> pd.DataFrame:
    """``frame`` with a ``label`` column right after its ranker column (``key``)."""
    out = frame.copy()
    out.insert(list(out.columns).index(key) + 1, "label", [labels.get(str(v), str(v)) for v in out[key]])
    return out


def _report_md(split: str, tables: dict[str, pd.DataFrame], figures: list[Path], manifest: dict[str, Any]) -> str:
    """The verdicts in words first, then Table II with intervals, gates and pins, what failed, and the rest."""
    labels = _label_of(tables, manifest)
    lines = [f"# Preference Is Not Position — {split}", "",
             f"Profile {md_code(manifest.get('profile', {}).get('name', '?'))}, "
             f"commit {md_code(manifest.get('code_commit', '?'))}, run {md_code(manifest.get('run_id'))}.", ""]
    if manifest.get("partial"):
        lines += ["**Partial run**: this run did not compute every output of the split, so it was published apart "
                  "from the complete results:", "", *[f"- {md_escape(reason)}" for reason in manifest["partial"]], ""]
    moved = inherited_misses(tables["claims"]) if "claims" in tables else []
    if moved:
        lines += ["## Inherited checks this run missed", "",
                  "The profile inherits these pins, expectations and gates from the files it extends; this run does "
                  "not meet them. They are reported, not failed (`[profile] inherit_checks = true` fails on them):",
                  "", *[f"- {line}" for line in moved], ""]
    undecidable = undecidable_on_subset(tables["claims"]) if "claims" in tables else []
    if undecidable:
        lines += ["## Expectations this subset cannot decide", "",
                  "Reviewed on the full run; this subset's evidence decides neither way, so they are not checked "
                  "here (a subset that decides against one fails):", "", *[f"- {line}" for line in undecidable], ""]
    lost = lost_expectations(tables["claims"]) if "claims" in tables else []
    if lost:
        lines += ["## Reviewed verdicts this run no longer decides", "",
                  "The profile records these claims as decided; this run's evidence decides neither way (a CI run "
                  "with `--gate-expectations` fails on them):", "", *[f"- {line}" for line in lost], ""]
    if "claims" in tables:
        lines += verdict_lines(tables["claims"], labels, stopping_points(tables.get("sequential")))
    if "table2" in tables:
        lines += [f"## {TABLES['table2'][0]}", "",
                  f"95% source-group bootstrap intervals; an interval over fewer than {RELIABLE_N} directions or of "
                  "zero width carries a note, as it cannot be read as one. Δ strict is paired against the row's own "
                  "baseline (`Δ vs`, its `compare_to`); every column is in `table2.csv`.", "",
                  table2_markdown(tables["table2"], labels), ""]
    if "claims" in tables:
        lines += gates_and_pins_lines(tables["claims"])
    if manifest.get("not_evaluated"):
        lines += ["## Failed or skipped (their rows are missing; everything else is published)", "",
                  *[f"- {md_code(entry['test'])} {md_escape(entry['outcome'])}: {md_escape(entry['message'])}"
                    for entry in manifest["not_evaluated"]], ""]
    if "unavailable" in tables:
        lines += [f"## {TABLES['unavailable'][0]}", "",
                  "An unavailable judgment sends its query back to the reference order and is retried on the next "
                  "run (`unavailable.csv` has the counts):", "",
                  *[f"- {md_escape(line)}" for line in unavailable_lines(tables["unavailable"])], ""]
    if "endpoints" in tables:
        lines += [f"## {TABLES['endpoints'][0]}", "",
                  "An endpoint that stopped answering was taken out and its requests in flight went to the others; "
                  "scores never depend on the endpoint (`endpoints.csv`, `judgments.csv` column `endpoint`):", "",
                  *[f"- {md_escape(line)}" for line in endpoint_lines(tables["endpoints"])], ""]
    lines += ["## Files", "",
              "- `table1.csv` populations; `table2.csv` one row per ranker (contract columns, then intervals, then "
              "`label` and `compare_to`); `table3.csv` pair-only vs window; `nevir_paired.csv` given-pair paired accuracy "
              "under both tie rules; `tie_branch.csv`; `pairwise.csv`; "
              "`cost.csv`; `claims.csv` (every claim with its p-values, MDE and reason); "
              "`unavailable.csv` (unavailable judgments by cause, when there are any); `endpoints.csv` (server "
              "endpoints per ranker, when there are any); `coverage.csv` (TREC runs); "
              "`judgments.csv` (every text judgment); `comparison.csv` (--compare-to)",
              "- `qrels.txt`, `runs/<ranker>.trec` (full pool, final order), `pool.parquet`, `directions.csv` "
              "(one row per planned direction, per-ranker outcomes)",
              "- `table2.tex` (booktabs), figures as PNG with the plotted data as CSV, `manifest.json` (code, data, "
              "models, seeds, samples, stage wall-clock, the sha256 of every other file)", ""]
    for name, (title, keys, _) in TABLES.items():
        if name in tables and name not in INTERNAL and name not in ("claims", "unavailable", "endpoints", "table2",
                                                                      "nevir_paired"):
            frame = _brief(name, tables[name])
            if keys[0] in ("ranker", "scorer") and keys[0] in frame.columns:
                frame = _with_label_column(frame, keys[0], labels)
            lines += [f"## {title}", "", _md_frame(frame).to_markdown(index=False, floatfmt=".4g"), ""]
    if "nevir_paired" in tables and len(tables["nevir_paired"]):
        lines += [f"## {TABLES['nevir_paired'][0].split(';')[0]}, beside published NevIR figures", "", CAVEAT, "",
                  _md_frame(beside_published(tables["nevir_paired"], labels, split, published_paired()))
                  .to_markdown(index=False, disable_numparse=True), "",
                  "Published figures: `docs/reference-results.md` (sources and settings); this run's: "
                  "`nevir_paired.csv`.", ""]
    paper = paper_table2(split, int(tables["table2"]["n"].max()) if "table2" in tables else None)
    if paper is not None:
        lines += ["## Reference: the paper's published Table II (not this run)", "",
                  "Values reported in the text of *Preference Is Not Position* (Test; GPU models: text-embedding-v4, "
                  "doubao sparse, BGE-reranker-v2-m3, Qwen3-14B-AWQ); blank where the text does not report them.", "",
                  paper.to_markdown(index=False, floatfmt=".4g"), ""]
    for fig in figures:
        lines += [f"![{fig.stem}]({fig.name})", ""]
    return "\n".join(lines)


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under a published split folder but its manifest (relative POSIX paths)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def _write(out: Path, split: str, tables: dict[str, pd.DataFrame], context: dict[str, Any]) -> None:
    manifest = _manifest(tables, context)
    if "table2" in tables:  # every table, figure and page below names a ranker with its declared label
        tables = {**tables, "table2": with_labels(tables["table2"], manifest)}
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
        annotated = _read_sealed(population)
        write_qrels(annotated, out / "qrels.txt")
        rankers = list(tables["table2"]["ranker"]) if "table2" in tables else []
        outcomes = {r: _read_sealed(p) for r in rankers if (p := _artifact(tables, f"outcomes:{r}")) is not None}
        directions_table(annotated, outcomes).to_csv(out / "directions.csv", index=False)
    compare = context.get("compare")
    if compare is not None and "table2" in tables:  # --compare-to: against the saved run, before this one replaces it
        directions = pd.read_csv(out / "directions.csv") if (out / "directions.csv").is_file() else None
        comparison = compare(split, tables["table2"], manifest, directions)
        if comparison is not None:
            tables["comparison"] = comparison
            comparison.to_csv(out / "comparison.csv", index=False)
            comparison.to_json(out / "comparison.json", orient="records", indent=1)
    judgments = [_read_sealed(_artifact(tables, a)) for a in (tables["artifacts"]["artifact"]
                                                                   if "artifacts" in tables else [])
                 if a.startswith("judgments:")]
    if judgments:  # every text scorer's judgments, one row per (ranker, scope, qid, pid)
        pd.concat(judgments, ignore_index=True).to_csv(out / "judgments.csv", index=False)
    pool = _artifact(tables, "pool")
    if pool is not None:
        _copy_sealed(pool, out / "pool.parquet")
    for artifact in (tables["artifacts"]["artifact"] if "artifacts" in tables else []):
        if artifact.startswith("run:"):
            _copy_sealed(_artifact(tables, artifact), out / "runs" / f"{artifact[4:]}.trec")
    figures = write_figures(out, tables, context.get("figure_cache"))
    if population is not None and "table2" in tables:
        manifest["explore"] = write_explore(out, split, tables, manifest, figures, context.get("figure_cache"))
    (out / "report.md").write_text(_report_md(split, tables, figures, manifest), encoding="utf-8")
    manifest["files"] = file_digests(out)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str), encoding="utf-8")


@contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM are recorded instead of acted on while publishing; the list says which arrived.

    Publishing checks the list between steps (``publish``'s ``should_stop``) and abandons a
    staged run cleanly, so an interrupt never leaves a traceback or a half-swapped results folder.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def publish(root: Path, run_id: str, splits: dict[str, dict[str, pd.DataFrame]], context: dict[str, Any],
            should_stop: Callable[[], bool] = lambda: False) -> dict[str, Path]:
    """Stage every split of a run under ``<root>/.runs/<run_id>`` and swap them in together.

    ``context`` holds what is common to the splits (``exitstatus``, ``figure_cache``) and, per
    split, ``context["splits"][split]`` what is not (``not_evaluated``, ``partial``). Returns
    ``<root>/<split>`` per split. ``should_stop`` is asked between steps; when it says so the
    staged run is abandoned (``PublishInterrupted``) and ``root`` is left as it was.
    """
    root = Path(root)
    if context.get("exitstatus") == INTERRUPTED:
        raise PublishError(f"the run was interrupted; {root} keeps the previous complete results")
    try:
        run = StagedRun(root, run_id, legacy_marker="table2.csv", skip=(PARTIAL,))
    except (OSError, Timeout) as exc:
        raise PublishError(f"cannot publish into {root} ({type(exc).__name__}: {exc}); "
                           "the previous results are left as they were") from exc

    def checkpoint() -> None:
        if should_stop():
            raise PublishInterrupted(f"interrupted while publishing; {root} keeps the previous complete results "
                                     f"(run {current_run(root)})")

    try:
        for split, tables in splits.items():
            checkpoint()
            out = run.folder / split
            out.mkdir()
            _write(out, split, tables, {**context, **context.get("splits", {}).get(split, {}), "run_id": run_id})
        checkpoint()
        run.commit(splits)
    except PublishError:
        raise
    except Exception as exc:  # anything before the commit leaves the previous run published
        raise PublishError(f"publishing into {root} failed ({type(exc).__name__}: {exc}); "
                           f"{root} keeps the previous complete results (run {current_run(root)})") from exc
    finally:
        run.close()
    return {split: root / split for split in splits}
