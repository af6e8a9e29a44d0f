"""Table II recomputed from a published split folder alone (``results/<split>/``), as an outside re-checker would:
nothing of the suite is imported, only the files and the rules the docs state (docs/outputs.md#re-checking).

- **Positions** (MRR, Pref@k, nDCG@10): ``ir_measures`` (pytrec_eval) on ``qrels.txt`` and each ranker's
  ``runs/<ranker>.trec``, the list order read from the run's rank column (equal scores are ties, which the ranker
  orders itself: pytrec_eval would put the larger passage id first), over the eligible directions the run covers.
- **Strict preference, ties, paired accuracy**: NevIR's own definition on the run's scores: a direction is right
  when its preferred passage scores strictly above its counterpart, a tie is equal scores, and a complete pair
  (both directions eligible, both covered) is right when both of its directions are. A ranker judged on its
  designated pair only has no run: its two passages' keys come from ``judgments.csv`` (``rule_score``) and its
  reference's and tie-breaker's runs by the designated rule (docs/protocol.md#designated-mode).

``python tests/support/oracle.py results/test`` prints every ranker's recomputed and published values and exits 1
on a difference.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd

#: The window a text reranker rescores: its reference's top 20 (docs/protocol.md#window-rule).
WINDOW = 20
#: The Table II columns the files reproduce, and those only a full-pool ranker (one with a run) has.
COUNTS = ("n", "strict", "ties", "paired", "paired_n")
RATES = ("strict_pct", "paired_pct")
POSITIONS = ("mrr", "pref_at_1", "pref_at_3", "pref_at_10", "ndcg_at_10")
MEASURES = [ir_measures.RR, ir_measures.Success @ 1, ir_measures.Success @ 3, ir_measures.Success @ 10,
            ir_measures.nDCG @ 10]


def read_run(path: Path) -> pd.DataFrame:
    """A TREC run as [qid, pid, rank, score], read as text (scores exactly as written)."""
    frame = pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "q0", "pid", "rank", "score", "tag"],
                        dtype={"qid": str, "pid": str, "rank": np.int64, "score": float}, keep_default_na=False)
    return frame[["qid", "pid", "rank", "score"]]


def eligible(folder: Path) -> pd.DataFrame:
    """directions.csv's eligible directions with ``complete`` (both directions of their pair eligible)."""
    d = pd.read_csv(folder / "directions.csv", dtype={"qid": str, "pair_id": str, "preferred_pid": str,
                                                      "counterpart_pid": str}, keep_default_na=False)
    d = d[d["eligible"].astype(str).str.lower() == "true"].copy()
    d["complete"] = d.groupby("pair_id")["qid"].transform("size").eq(2)
    return d.set_index("qid")


def positions(run: pd.DataFrame, qrels_path: Path, qids: pd.Index) -> pd.DataFrame:
    """Per-query RR, Success@k and nDCG@10 by pytrec_eval, the list order from the rank column."""
    docs = [ir_measures.ScoredDoc(q, p, -float(r)) for q, p, r in zip(run["qid"], run["pid"], run["rank"])]
    qrels = [q for q in ir_measures.read_trec_qrels(str(qrels_path)) if q.query_id in set(qids)]
    rows = [(m.query_id, str(m.measure), m.value) for m in ir_measures.pytrec_eval.iter_calc(MEASURES, qrels, docs)]
    return pd.DataFrame(rows, columns=["qid", "measure", "value"]).pivot(index="qid", columns="measure",
                                                                         values="value").reindex(qids)


def keyed(run: pd.DataFrame, d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """Each covered eligible direction's (preferred, counterpart) run scores, and those directions."""
    scores = run.set_index(["qid", "pid"])["score"]
    qids = d.index[d.index.isin(run["qid"])]
    pos = scores.reindex(pd.MultiIndex.from_arrays([qids, d.loc[qids, "preferred_pid"]])).to_numpy()
    neg = scores.reindex(pd.MultiIndex.from_arrays([qids, d.loc[qids, "counterpart_pid"]])).to_numpy()
    return pos, neg, qids


def designated(folder: Path, ranker: str, declared: dict, d: pd.DataFrame) -> tuple[list, list, pd.Index]:
    """The designated rule's keys of each direction a designated-pair ranker judged: a passage in its reference's
    top 20 gets (1, rule score, tie-breaker score), one below (0, 0, reference score); a direction with an
    unavailable score on a windowed designated passage falls back to its reference's score, (s, 0, 0)."""
    judged = pd.read_csv(folder / "judgments.csv", dtype={"qid": str, "pid": str}, keep_default_na=False,
                         na_values=[""])
    judged = judged[(judged["ranker"] == ranker) & (judged["scope"] == "pair")].set_index(["qid", "pid"])
    reference = read_run(folder / "runs" / f"{declared['reference']}.trec").set_index(["qid", "pid"])
    tie = read_run(folder / "runs" / f"{declared.get('tie_breaker') or declared['reference']}.trec") \
        .set_index(["qid", "pid"])["score"]
    qids = d.index[d.index.isin(judged.index.get_level_values("qid"))]
    keys = {"pos": [], "neg": []}
    for q in qids:
        sides = {}
        for side, column in (("pos", "preferred_pid"), ("neg", "counterpart_pid")):
            at = (q, d.at[q, column])
            text = judged["rule_score"].get(at, math.nan)
            sides[side] = (reference.at[at, "rank"] <= WINDOW, float(text), reference.at[at, "score"], tie.get(at))
        fallback = any(head and not math.isfinite(text) for head, text, _, _ in sides.values())
        for side, (head, text, ref, t) in sides.items():
            keys[side].append((ref, 0.0, 0.0) if fallback else (1.0, text, t) if head else (0.0, 0.0, ref))
    return keys["pos"], keys["neg"], qids


def recompute(folder: Path) -> pd.DataFrame:
    """Every Table II ranker's recomputed values (``COUNTS``, ``RATES`` and, with a run, ``POSITIONS``)."""
    folder = Path(folder)
    d = eligible(folder)
    rankers = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["profile"]["rankers"]
    out = {}
    for ranker in pd.read_csv(folder / "table2.csv")["ranker"].astype(str):
        path = folder / "runs" / f"{ranker}.trec"
        row: dict[str, float] = {}
        if path.is_file():
            run = read_run(path)
            pos, neg, qids = keyed(run, d)
            strict, tie = pos > neg, pos == neg
            got = positions(run, folder / "qrels.txt", qids)
            row.update(mrr=got["RR"].mean(), ndcg_at_10=got["nDCG@10"].mean(),
                       **{f"pref_at_{k}": 100 * got[f"Success@{k}"].mean() for k in (1, 3, 10)})
        else:
            pos_keys, neg_keys, qids = designated(folder, ranker, rankers[ranker], d)
            strict = np.array([a > b for a, b in zip(pos_keys, neg_keys)], dtype=bool)
            tie = np.array([a == b for a, b in zip(pos_keys, neg_keys)], dtype=bool)
        right = pd.Series(strict, index=qids)
        pairs = d.loc[qids].assign(right=right)
        pairs = pairs[pairs["complete"]].groupby("pair_id")["right"].agg(["size", "all"])
        pairs = pairs[pairs["size"] == 2]  # a sample of single directions may hold one of a pair
        row.update(n=len(qids), strict=int(strict.sum()), ties=int(tie.sum()), paired=int(pairs["all"].sum()),
                   paired_n=len(pairs), strict_pct=100 * strict.mean(),
                   paired_pct=100 * pairs["all"].mean() if len(pairs) else math.nan)
        out[ranker] = row
    return pd.DataFrame.from_dict(out, orient="index")


def differences(folder: Path, tolerance: float = 1e-9) -> list[str]:
    """Every Table II value the files do not reproduce, one line each ('' when they all do)."""
    published = pd.read_csv(Path(folder) / "table2.csv").set_index("ranker")
    got = recompute(folder)
    lines = []
    for ranker, row in got.iterrows():
        for column, value in row.items():
            if column not in published.columns or (pd.isna(value) and pd.isna(published.at[ranker, column])):
                continue
            expected = float(published.at[ranker, column])
            if not math.isclose(float(value), expected, rel_tol=tolerance, abs_tol=tolerance):
                lines.append(f"{ranker}.{column}: files give {value!r}, table2.csv has {expected!r}")
    return lines


if __name__ == "__main__":
    found = differences(Path(sys.argv[1]))
    print("\n".join(found) if found else f"every Table II value of {sys.argv[1]} is reproduced from its files")
    sys.exit(1 if found else 0)
