"""Why judgments were unavailable: every window ranker's unavailable judgments counted by cause, per scope.

An unavailable judgment (a server error, a timeout, an unparseable or non-finite answer) sends its
query back to the reference order and is retried on the next run (``docs/protocol.md#fallback``);
the run says why, per ranker and scope, in ``report.md``, ``manifest.json`` (``unavailable``),
``unavailable.csv`` and at the end of the terminal output. Replies stored cut to the declared cap
(``max_reply_chars``) are counted beside them. A server-backed ranker also says which endpoints made its judgments
in this run and which were taken out for not answering (``docs/protocol.md#endpoints``): ``endpoints.csv``,
``report.md`` and ``manifest.json`` (``endpoints``).
"""
from __future__ import annotations

from rankers.scorers.cache import MAX_REPLY_CHARS, capped_replies, endpoint_summary, unavailable_causes


def test_unavailable_judgments_by_cause(evaluation, split, window_ranker, report) -> None:
    decl = evaluation.decl(window_ranker)
    cap = int(decl.options.get("max_reply_chars", MAX_REPLY_CHARS))
    for scope in ("pair",) if decl.designated_only else ("window", "pair"):
        scored = evaluation.text_scores(split, window_ranker, scope)
        # Counted in judgments (a listwise window's one list, not its 20 passage rows): docs/protocol.md#judging-cost.
        causes, capped = unavailable_causes(scored.judged), capped_replies(scored.frame)
        base = {"ranker": window_ranker, "scope": scope, "inputs": scored.n_unique}
        for i, (cause, count) in enumerate(causes.items()):
            report.add("unavailable", split, {**base, "issue": "unavailable", "cause": cause, "count": count},
                       order=decl.order * 100 + i)
        if capped:
            report.add("unavailable", split, {**base, "issue": "capped", "count": capped,
                                              "cause": f"over {cap:,} characters stored cut"},
                       order=decl.order * 100 + 99)
        assert sum(causes.values()) == scored.n_unavailable


def test_endpoints_that_judged_and_those_taken_out(evaluation, split, window_ranker, report) -> None:
    decl = evaluation.decl(window_ranker)
    for scope in ("pair",) if decl.designated_only else ("window", "pair"):
        scored = evaluation.text_scores(split, window_ranker, scope)
        if scored.calls is not None:  # a judgment used twice in a window is one request
            made = scored.calls.drop_duplicates("key")
        else:
            made = scored.frame.drop_duplicates(["qid", "pid"])
        summary = endpoint_summary(made["usage"], made["cached"])
        for i, (endpoint, entry) in enumerate(summary.items()):
            report.add("endpoints", split, {"ranker": window_ranker, "scope": scope, "endpoint": endpoint, **entry},
                       order=decl.order * 100 + i)
        assert sum(int(e["judgments"]) for e in summary.values()) <= len(made)
