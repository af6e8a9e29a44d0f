"""Repairs and position bias of judges that see several passages at once (``docs/protocol.md#listwise``).

A listwise or pairwise judgment depends on the order the passages were shown in. This table says how much,
per ranker and scoring scope, from the judgments the ranker already made (plus its declared order check):

- **listwise**: windows judged and fallen back; windows whose replies needed a repair (duplicates,
  out-of-range identifiers, missing identifiers appended); and, for the ``order_check`` windows presented
  in reverse, the share whose two designated passages came out in the other relative order (**order
  sensitivity**), with the mean Kendall tau between the two permutations (1: the input order did not matter);
- **pairwise**: compared pairs and the share that is **inconsistent** (the two orders prefer different
  passages), and the share of judgments answering with the first-shown passage (0.5 without position bias).

Each window is one direction (a qid), so the designated pair of a checked window is that direction's.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

REPAIRS = ("duplicates", "out_of_range", "missing")


def _pair_order(order: tuple[str, ...], first: str, second: str) -> bool | None:
    """Whether ``first`` comes before ``second`` in ``order``; None when either is not in it."""
    if first not in order or second not in order:
        return None
    return order.index(first) < order.index(second)


def _tau(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    if len(a) < 2 or set(a) != set(b):
        return float("nan")
    from scipy.stats import kendalltau  # only listwise judges have orders to compare: spare every run its import

    where = {pid: i for i, pid in enumerate(b)}
    return float(kendalltau(np.arange(len(a)), [where[p] for p in a]).statistic)


def order_bias_row(ranker: str, scope: str, windows: pd.DataFrame, calls: pd.DataFrame,
                   directions: pd.DataFrame) -> dict[str, object]:
    """One row of ``order_bias.csv``. ``directions``: eligible directions (qid, preferred_pid, counterpart_pid)."""
    main = windows[windows["variant"] == "main"].set_index("qid")
    row: dict[str, object] = {"ranker": ranker, "scope": scope, "windows": len(main),
                              "fallback_windows": int(main["fallback"].sum()),
                              "judgments": int(calls["key"].nunique()) if len(calls) else 0,
                              "unusable_judgments": int((~calls.drop_duplicates("key")["available"].astype(bool)).sum())
                              if len(calls) else 0}
    for name in REPAIRS:
        if name in main:
            row[f"windows_with_{name}"] = int((main[name].fillna(0) > 0).sum())
    if "inconsistent" in main:  # pairwise
        pairs, bad = float(main["pairs"].fillna(0).sum()), float(main["inconsistent"].fillna(0).sum())
        row.update(pairs=int(pairs), inconsistent_pairs=int(bad),
                   inconsistent_pct=100.0 * bad / pairs if pairs else float("nan"))
        answered = calls.drop_duplicates("key")
        answered = answered[answered["available"].astype(bool)]
        row["first_shown_chosen_pct"] = 100.0 * float((answered["result"] == 0).mean()) if len(answered) \
            else float("nan")
    checks = windows[windows["variant"] == "reversed"].set_index("qid")
    if len(checks):
        pairs = directions.set_index("qid")
        checked = changed = compared = 0
        taus = []
        for qid, check in checks.iterrows():
            if check["fallback"] or qid not in main.index or main.loc[qid, "fallback"]:
                continue
            checked += 1
            forward, backward = tuple(main.loc[qid, "order"]), tuple(check["order"])
            taus.append(_tau(forward, backward))
            if qid in pairs.index:
                p, c = pairs.loc[qid, "preferred_pid"], pairs.loc[qid, "counterpart_pid"]
                a, b = _pair_order(forward, p, c), _pair_order(backward, p, c)
                if a is not None and b is not None:
                    compared += 1
                    changed += a != b
        row.update(order_checked=checked, order_checked_with_pair=compared, order_changed=changed,
                   order_changed_pct=100.0 * changed / compared if compared else float("nan"),
                   order_kendall_tau=float(np.nanmean(taus)) if taus and not np.isnan(taus).all() else float("nan"))
    return row
