"""report.md: the bottom line and the verdict table first, then each verdict in words, Table II with intervals, gates and
pins, what failed, and the rest.

It reads one split's record (``reports.record.SplitRecord``) and the run's publication facts
(which tests did not run, why the run is partial); the numbers and their cells come from
``reports.render``, so report.md, the terminal and LaTeX show the same values.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.reference import published_paired
from reports.claim_families import FAMILY_RULE, same_numbers_elsewhere, single_seed
from reports.decision_intervals import published
from reports.hypotheses import DESCRIPTIVE, DIGITS, SEQUENCE, format_interval, format_p
from reports.bottom_line import (MEASURE_WORDS, bottom_line, measured_text, num, reference_lines, section_of, seeds_of,
                                 substitutions, verdict_table)
from reports.paper import reference_rows
from reports.record import Publication, SplitRecord
from reports.reference import CAVEAT, beside_published
from reports.render import (brief, endpoint_lines, equal_numbers_note, md_code, md_escape, md_frame,
                            needed_in_units, not_evaluated_lines, table2_markdown, unavailable_lines,
                            with_label_column)
from reports.sequential import StoppingPoint, stopping_points
from reports.table_registry import TABLES
from reports.tables import RELIABLE_N, interval_note

#: Verdict sections of report.md: the study's families, then every other family (beyond the paper, declared).
FAMILY_TITLES = {"H1": "H1: preference is not position (the profile's declared comparisons)",
                 "H2": "H2: window reranking against each ranker's compare_to baseline",
                 "H3": "H3: the equal-grade branch holds more of the failures than of the directions",
                 "beyond": "Beyond the paper (and claims of no study family)"}


def verdict_sentence(row: dict[str, Any], labels: dict[str, str], stop: StoppingPoint | None = None) -> str:
    """One claim in words: status, what is compared, effect (with the seeds it is from) with its decision interval and
    the descriptive interval beside it (and its note), n, and why; for a claim on a sequential sample (``stop``), where
    the sample stopped (docs/statistics.md#sequential-samples). The family's hypotheses are listed once, under the
    verdict table, not here."""
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
    effect, lo, hi, n = num(row, "effect"), num(row, "lo"), num(row, "hi"), num(row, "n")
    if pd.isna(effect):
        measured = md_escape(row.get("measured", ""))
        return (f"- **{md_escape(row['status'])}** — {subject}: {measured}"
                f"{'.' if stopped and not measured.endswith('.') else ''}{stopped}")
    note = interval_note(n, lo, hi)
    groups, units = num(row, "n_groups"), row.get("units")
    size = f"n = {int(n):,} directions" + (
        "" if pd.isna(groups) else ", each its own unit" if units == "directions" else
        f" in {int(groups):,} complete pair{'' if groups == 1 else 's'}, one pair a unit" if units == "pairs" else
        f" in {int(groups):,} source group{'' if groups == 1 else 's'}")
    p, q = num(row, "p_adjusted"), num(row, "p_opposite_adjusted")
    if pd.isna(p):
        why = "unable to decide: too few source groups for any outcome to reach α, so it is left out of its family"
    else:
        why = f"Holm-adjusted one-sided p {format_p(p)} on the claimed side, {format_p(q)} on the other"
        hypotheses = num(row, "family_hypotheses")
        if pd.notna(hypotheses):
            why += f" in family {md_escape(row.get('family', ''))} ({int(hypotheses)} hypotheses)"
        if row["status"] == "inconclusive":
            mde, needed = num(row, "mde"), num(row, "directions_needed")
            test = f" ({md_escape(row['mde_test'])})" if pd.notna(row.get("mde_test")) and row.get("mde_test") else ""
            if pd.notna(mde):
                why += (f"; MDE {mde:.{digits}f} {unit}{test}" if mde != float("inf") else
                        f"; no effect these differing groups allow gives 80% power{test}")
            if pd.notna(needed):
                why += (f"; about {int(needed):,} directions{needed_in_units(row, needed)} would give 80% "
                        f"power at this effect{test}")
    family = str(row.get("family", ""))
    own = f" (family {family})" if ":" in family else ""
    decision = published(row)
    descriptive = SEQUENCE if stop is not None else DESCRIPTIVE
    interval = (f"decision interval {decision.text(digits)}, {descriptive} " if decision.defined
                else f"{descriptive} ")
    seeds = f", {seeds_of(row)}" if seeds_of(row) else ""
    return (f"- **{md_escape(row['status'])}** — {subject}: {effect:+.{digits}f} {unit}{seeds}; {interval}"
            f"{format_interval(lo, hi, digits)}"
            f"{' ' + note if note else ''} (claimed {row.get('claimed')}), {size}{own}; {why}.{stopped}")


def _rows_checked(claims: pd.DataFrame, check: str) -> list[dict[str, Any]]:
    """claims.csv rows whose expectation, gate or pin came out as ``check`` (the ``check`` column)."""
    if "check" not in claims.columns:
        return []
    return [r for r in claims.to_dict("records") if r.get("check") == check]


def lost_expectations(claims: pd.DataFrame) -> list[str]:
    """Claims the profile reviewed as decisive (holds / fails) that this run left inconclusive, one line each."""
    lost = [r for r in _rows_checked(claims, "undecided") if r.get("family") not in ("gate", "pin")]
    return [f"{md_code(r['claim'])} was reviewed as **{r['expected']}** ({md_code(r['declared_in'])}) but is "
            f"inconclusive now: {measured_text(r)}" for r in lost]


def undecidable_on_subset(claims: pd.DataFrame) -> list[str]:
    """Full-run expectations a subset run cannot decide, one line each (docs/statistics.md#expectations), those
    the subset gate fails first (docs/statistics.md#subset-gate)."""
    why = {"contradicted on this subset": "its interval lies wholly beyond the subset gate's margin against it",
           "contradicted by the full run": "the profile's saved full run recorded another verdict"}
    gated = [f"{md_code(r['claim'])}: {md_code(r['declared_in'])} expects **{r['expected']}** (reviewed on the full "
             f"run); not decidable on this subset, and {reason} (**fails the gate**): {measured_text(r)}"
             for check, reason in why.items() for r in _rows_checked(claims, check)]
    blind = {"not gateable on this subset": ", and no interval on it can gate its measure nor is a full run saved (not "
                                            "gated; the run said what would gate it before its work)",
             "not decidable on this subset": ""}
    return gated + [f"{md_code(r['claim'])}: {md_code(r['declared_in'])} expects **{r['expected']}** (reviewed on "
                    f"the full run); not decidable on this subset{reason}: {measured_text(r)}"
                    for check, reason in blind.items() for r in _rows_checked(claims, check)]


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
                         f"{source}; {measured_text(r)}): comparisons against {ranker} are against the moved ranker")
        elif r.get("family") == "gate":
            lines.append(f"{name} of {source} fails (measured {measured_text(r)}); inherited, so reported, not gating")
        else:
            names = [str(r[k]) for k in ("ranker", "versus") if isinstance(r.get(k), str) and r[k]]
            lines.append(f"the study's claim {name} now **{r['status']}** where {source} records **{r['expected']}**: "
                         f"{' or '.join(md_code(n) for n in names)} moved, so comparisons against "
                         f"{'it' if len(names) == 1 else 'them'} are against the moved ranker ({measured_text(r)})")
    return lines


def verdict_lines(claims: pd.DataFrame, labels: dict[str, str],
                  stops: dict[str, StoppingPoint] | None = None) -> list[str]:
    """report.md's opening: per family (H1, H2, H3, beyond the paper) its tally and each claim in a sentence, a claim
    on a sequential sample with its stopping point (``stops``: claim -> point, from sequential.csv)."""
    stops = stops or {}
    rows = [r for r in claims.to_dict("records") if str(r.get("family")) not in ("gate", "pin")]
    for r in rows:
        r["family"] = "" if r.get("family") is None or pd.isna(r.get("family")) else str(r["family"])
    single = [r for r in rows if single_seed(r)]
    rows = [r for r in rows if r not in single]
    lines = ["## Each verdict, with its numbers and why", ""]
    if not rows:
        return lines + ["No hypothesis claim was measured in this run.", ""]
    if any(":" in r["family"] for r in rows):  # a user's own family beside the study's: say how families decide
        lines += [md_escape(FAMILY_RULE), ""]
    elsewhere = same_numbers_elsewhere(rows)
    for section, title in FAMILY_TITLES.items():
        members = [r for r in rows if section_of(r["family"]) == section]
        if not members:
            continue
        counts = {s: sum(r["status"] == s for r in members) for s in ("holds", "fails", "inconclusive")}
        lines += [f"### {title}", "",
                  f"Of {len(members)} claims: {counts['holds']} hold, {counts['fails']} fail, "
                  f"{counts['inconclusive']} inconclusive (not decided by this run).", "",
                  *[verdict_sentence(r, labels, stops.get(str(r["claim"])))
                    + (f" {equal_numbers_note(r, elsewhere[str(r['claim'])])}" if str(r["claim"]) in elsewhere else "")
                    for r in members], ""]
    if single:
        lines += ["### The same claims on one training seed (the paper's protocol)", "",
                  "Claims about a training procedure are decided above on the mean of its training seeds "
                  "(`seeds.csv` has each seed's values); the run's seed alone (Table II's row), decided in its own "
                  "Holm family, is reported here and never asserted.", "", *[verdict_sentence(r, labels) for r in single],
                  ""]
    return lines


#: A run comparison's decisions, gravest (what a reader must look at) first (docs/statistics.md#pins).
CHANGE_ORDER = ("changed", "undetermined", "changed within margin", "margin unreachable", "unchanged")
#: The columns report.md shows of a run comparison; the rest (p-values, margins, n, the paper's value) are in
#: comparison.csv (``reports.table_registry.TABLES['comparison']``).
COMPARISON_BRIEF_COLUMNS = ("ranker", "measure", "then", "now", "delta", "delta_lo", "delta_hi", "decision")


@dataclass(frozen=True)
class ComparisonBrief:
    """A comparison with a saved run as a reader meets it: what moved first, what held in one line."""

    moved: pd.DataFrame  # rows of the rankers in both runs not unchanged, the ranker with the gravest decision first
    unchanged: tuple[str, ...]  # rankers in both runs whose every measure is unchanged
    one_sided: dict[str, tuple[str, ...]]  # "this run only" / "saved run only" -> rankers, not compared
    saved_partial: str  # why the saved run is partial ("" when complete): said once, not per row
    versions_differ: str  # installed versions that differ between the runs, said once


def comparison_brief(frame: pd.DataFrame) -> ComparisonBrief:
    """``comparison.csv`` ordered for reading: rankers that changed lead, unchanged ones are named once."""
    both = frame[frame["side"] == "both"]
    # A decision this order does not know is read as the gravest: shown, never folded into "unchanged".
    rank = both["decision"].map({d: k for k, d in enumerate(CHANGE_ORDER)}).fillna(0).astype(int)
    gravest = rank.groupby(both["ranker"], sort=False).transform("min")
    order = {name: k for k, name in enumerate(dict.fromkeys(both["ranker"]))}
    keep = rank < CHANGE_ORDER.index("unchanged")
    moved = both[keep].assign(_g=gravest[keep], _o=both.loc[keep, "ranker"].map(order), _r=rank[keep]) \
        .sort_values(["_g", "_o", "_r"], kind="stable")
    columns = [c for c in COMPARISON_BRIEF_COLUMNS if c in frame.columns]
    unchanged = tuple(name for name in order if not keep[both["ranker"] == name].any())
    one_sided = {side: tuple(dict.fromkeys(frame.loc[frame["side"] == side, "ranker"]))
                 for side in ("this run only", "saved run only")}

    def once(column: str) -> str:
        values = [str(v) for v in frame.get(column, pd.Series(dtype=object)).dropna().unique() if str(v)]
        return "; ".join(values)

    return ComparisonBrief(moved[columns].reset_index(drop=True), unchanged,
                           {k: v for k, v in one_sided.items() if v}, once("saved_partial"), once("versions_differ"))


def comparison_lines(frame: pd.DataFrame) -> list[str]:
    """report.md's comparison with a saved run: the saved run's partiality and version changes once, the rankers
    that moved first, then the unchanged ones and the one-sided ones by name."""
    brief_ = comparison_brief(frame)
    lines = [f"## {TABLES['comparison'].title}", ""]
    if brief_.saved_partial:
        lines += [f"The saved run is partial ({md_escape(brief_.saved_partial)}): the rankers both runs hold are "
                  "compared.", ""]
    if brief_.versions_differ:
        lines += [f"Installed versions that differ from the saved run: {md_escape(brief_.versions_differ)}.", ""]
    if len(brief_.moved):
        lines += ["Not unchanged (gravest first; every measure and test is in `comparison.csv`):", "",
                  md_frame(brief_.moved).to_markdown(index=False, floatfmt=".4g"), ""]
    if brief_.unchanged:
        lines += [f"Unchanged in every measure: {', '.join(md_code(n) for n in brief_.unchanged)}.", ""]
    for side, names in brief_.one_sided.items():
        lines += [f"Rankers in {side}, not compared: {', '.join(md_code(n) for n in names)}.", ""]
    return lines


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
                  md_frame(moved[["claim", "status", "expected", "measured"]]).to_markdown(index=False), ""]
    return lines if len(lines) > 2 else []


def report_markdown(record: SplitRecord, tables: Mapping[str, pd.DataFrame], labels: Mapping[str, str],
                    figures: Sequence[Path], publication: Publication) -> str:
    """The verdicts in words first, then Table II with intervals, gates and pins, what failed, and the rest.

    ``tables`` are the record's as published (Table II with its labels, the comparison when there is one)."""
    split = record.split
    lines = [f"# Preference Is Not Position — {split}", "",
             f"Profile {md_code(record.profile_name or '?')}, "
             f"commit {md_code(record.entries.get('code_commit', '?'))}, run {md_code(publication.run_id)}.", ""]
    dataset = record.entries.get("dataset") or {}
    nevir = dataset.get("kind", "nevir") == "nevir"  # the paper and the published NevIR figures are about NevIR
    reference = reference_rows(dataset, split, int(tables["table2"]["n"].max())
                               if "table2" in tables and len(tables["table2"]) else None)
    if publication.partial:
        lines += ["**Partial run**: this run did not compute every output of the split, so it was published apart "
                  "from the complete results:", "", *[f"- {md_escape(reason)}" for reason in publication.partial], ""]
    substituted = substitutions(record.entries)  # rows another model scored in a refused shipped one's place
    if "claims" in tables or substituted:  # the first screen: the bottom line and the verdict table
        lines += bottom_line(tables.get("claims", pd.DataFrame()), substituted)  # (docs/outputs.md#reportmd)
    if "claims" in tables:
        lines += verdict_table(tables["claims"]) + reference_lines(tables["claims"], reference, dataset)
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
        lines += [f"## {TABLES['table2'].title}", "",
                  f"95% source-group bootstrap intervals; an interval over fewer than {RELIABLE_N} directions or of "
                  "zero width carries a note, as it cannot be read as one. Δ strict is paired against the row's own "
                  "baseline (`Δ vs`, its `compare_to`); every column is in `table2.csv`.", "",
                  table2_markdown(tables["table2"], labels), ""]
    if "claims" in tables:
        lines += gates_and_pins_lines(tables["claims"])
    if publication.not_evaluated:
        lines += ["## Failed or skipped (their rows are missing; everything else is published)", "",
                  *[f"- {line}" for line in not_evaluated_lines(publication.not_evaluated)], ""]
    if "unavailable" in tables:
        lines += [f"## {TABLES['unavailable'].title}", "",
                  "An unavailable judgment sends its query back to the reference order and is retried on the next "
                  "run (`unavailable.csv` has the counts):", "",
                  *[f"- {md_escape(line)}" for line in unavailable_lines(tables["unavailable"])], ""]
    if "endpoints" in tables:
        lines += [f"## {TABLES['endpoints'].title}", "",
                  "An endpoint that stopped answering was taken out and its requests in flight went to the others; "
                  "scores never depend on the endpoint (`endpoints.csv`, `judgments.csv` column `endpoint`):", "",
                  *[f"- {md_escape(line)}" for line in endpoint_lines(tables["endpoints"])], ""]
    lines += ["## Files", "",
              "- `table1.csv` populations; `table2.csv` one row per ranker (contract columns, then intervals, then "
              "`label` and `compare_to`); `table3.csv` pair-only vs window; `nevir_paired.csv` given-pair paired "
              "accuracy "
              "under both tie rules; `tie_branch.csv`; `pairwise.csv`; "
              "`cost.csv`; `claims.csv` (every claim with its p-values, MDE and reason); "
              "`unavailable.csv` (unavailable judgments by cause, when there are any); `endpoints.csv` (server "
              "endpoints per ranker, when there are any); `coverage.csv` (TREC runs); "
              "`judgments.csv` (every text judgment); `comparison.csv` (--compare-to)",
              "- `qrels.txt`, `runs/<ranker>.trec` (full pool, final order, the ranker's score keys: equal scores "
              "are ties, the rank column the list position), `pool.parquet`, `directions.csv` "
              "(one row per planned direction, per-ranker outcomes)",
              "- `table2.tex` (booktabs), figures as PNG with the plotted data as CSV, `manifest.json` (code, data, "
              "models, seeds, samples, stage wall-clock, the sha256 of every other file)", ""]
    for name, table in TABLES.items():
        if name == "comparison" and name in tables:
            lines += comparison_lines(tables[name])
        elif name in tables and name not in ("claims", "unavailable", "endpoints", "table2", "nevir_paired"):
            frame = brief(name, tables[name])
            key = table.keys[0]
            if key in ("ranker", "scorer") and key in frame.columns:
                frame = with_label_column(frame, key, labels)
            lines += [f"## {table.title}", "", md_frame(frame).to_markdown(index=False, floatfmt=".4g"), ""]
    if nevir and "nevir_paired" in tables and len(tables["nevir_paired"]):
        lines += [f"## {TABLES['nevir_paired'].title.split(';')[0]}, beside published NevIR figures", "", CAVEAT, "",
                  md_frame(beside_published(tables["nevir_paired"], labels, split, published_paired()))
                  .to_markdown(index=False, disable_numparse=True), "",
                  "Published figures: `docs/reference-results.md` (sources and settings); this run's: "
                  "`nevir_paired.csv`.", ""]
    if reference is not None and nevir:
        lines += ["## Reference: the paper's published Table II (not this run)", "",
                  "Values reported in the text of *Preference Is Not Position* (Test; GPU models: text-embedding-v4, "
                  "doubao sparse, BGE-reranker-v2-m3, Qwen3-14B-AWQ); blank where the text does not report them.", "",
                  reference.frame.to_markdown(index=False, floatfmt=".4g"), ""]
    elif reference is not None:
        lines += [f"## Reference: {md_escape(reference.source)} (not this run)", "",
                  f"The rows `[data] reference` declares for this split ({md_code(str(dataset['reference']['file']))}"
                  "); blank where they give no value.", "", reference.frame.to_markdown(index=False, floatfmt=".4g"), ""]
    for fig in figures:
        lines += [f"![{fig.stem}]({fig.name})", ""]
    return "\n".join(lines)
