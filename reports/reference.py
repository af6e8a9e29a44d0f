"""This run's given-pair paired accuracy beside the published NevIR figures (docs/protocol.md#given-pair-paired).

One table, rows of this run first: each pair-only (L1) scorer with both tie rules and their intervals, then every
published system of ``fixtures.reference`` with its source. The columns say which tie rule each number uses, as the
published figures do not share this suite's (ties fail).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from fixtures.reference import PublishedResult
from reports.columns import GivenPairMeasure
from reports.measures import NEVIR_PAIRED
from reports.tables import interval_note

#: What the table says before its rows, in report.md.
CAVEAT = ("Given-pair paired accuracy (NevIR's measure: both directions of a pair right, each judged on its two "
          "passages alone, with no pool) of this run's pair-only scorers, under both tie rules, beside published "
          "NevIR Test figures. The fixed-pool measures of Table II (strict preference, paired, MRR within the pool) "
          "are not comparable to the published figures: coverage conditioning and composite ranking change the "
          "population and the keys. This suite fails a tie; MTEB's NevIR task scores recall@1 with pytrec_eval, which "
          "puts the passage with the larger id first, so its column is that rule on this run's passage ids (a pair "
          "tied in both directions fails under both).")
COLUMNS = ("system", "source", "pairs", "ties fail (this suite) [95% CI]",
           "ties by passage id, descending (trec_eval; MTEB's NevIR task) [95% CI]", "pairs with a tie", "published")
#: nevir_paired.csv's rates with their intervals (``reports.measures.NEVIR_PAIRED``), one per tie rule, in the order
#: of their two columns above: ties fail, then ties by passage id as trec_eval and MTEB order them.
RATES = tuple(m for m in NEVIR_PAIRED if isinstance(m, GivenPairMeasure) and m.rule is not None)


def _pct(value: object, lo: object, hi: object, n: object) -> str:
    if value is None or pd.isna(value):
        return "--"
    note = interval_note(n, lo, hi)
    return f"{float(value):.1f} [{float(lo):.1f}, {float(hi):.1f}]{f' {note}' if note else ''}"


def beside_published(nevir_paired: pd.DataFrame, labels: Mapping[str, str], split: str,
                     published: Sequence[PublishedResult]) -> pd.DataFrame:
    """This run's rows (``nevir_paired.csv``), then the published ones, as display strings in ``COLUMNS`` order."""
    rows = [(labels.get(str(r["scorer"]), str(r["scorer"])), f"this run ({split}), pair-only scoring (L1)",
             str(int(r["pairs"])), *(_pct(r[m.name], *(r[b] for b in m.bounds or ()), r["pairs"]) for m in RATES),
             str(int(r["tied_pairs"])), "--") for r in nevir_paired.to_dict("records")]
    rows += [(p.system, f"{p.source}, {p.source_table} ({p.setting})", "--", "--", "--", "--", f"{p.paired_pct:.1f}")
             for p in published]
    return pd.DataFrame(rows, columns=list(COLUMNS))
