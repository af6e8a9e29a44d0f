"""A window ranker's judgments in the session: what it judges, judged once per run, within its stated budget.

``WindowJudging`` is the part of the session (``harness.session.Evaluation``) that hands a window
ranker's inputs (its reference's top-20 window per query, or each direction's designated pair)
to its kind, once per (split, ranker, scope) across pytest-xdist workers, after printing what the
stage will cost and stopping one over ``--max-judge-minutes`` (docs/protocol.md#judging-cost).
"""
from __future__ import annotations


from filelock import FileLock

from fixtures import progress
from fixtures.identity import parts_digest, texts_digest
from fixtures.populations import eligible_directions
from harness.memo import per_instance
from rankers.kinds.base import KindBuildError, score_store
from rankers.declarations import RankerDecl
from rankers.scorers.base import TextScorer
from rankers.scorers.cache import ScoredInputs
from rankers.scorers.store import CACHE_FILE
from rankers.window import TextInput, pair_inputs, window_inputs

#: What a window ranker judges: its reference's top-20 window per query, or each direction's two designated passages.
SCOPES = ("window", "pair")


class OverBudget(KindBuildError):
    """A judging stage's estimate exceeds ``--max-judge-minutes``; it stopped before judging (its rows fail)."""


class WindowJudging:
    """The session's window judgments (mixed into ``Evaluation``, whose data and bookkeeping they read)."""

    def scorer(self, name: str) -> TextScorer:
        """The text scorer of a window ranker (declarations with the same options share one); for benchmarks."""
        decl = self.decl(name)
        if not decl.is_window:
            raise ValueError(f"{self.where(decl)} is a full-pool ranker; it has no text scorer")
        return decl.ranker_kind.scorer(decl, self.context)

    def inputs(self, split: str, name: str, scope: str) -> list[TextInput]:
        """What a window ranker judges in one scope: its reference's top 20 per query, or the designated pairs."""
        decl = self.decl(name)
        corpus = self.study.corpus_for(split)
        if scope == "window":
            return window_inputs(self._reference(split, decl, "reference"), self.queries(split), corpus)
        if scope == "pair":
            return pair_inputs(eligible_directions(self.directions_for(split, name)), corpus)
        raise KeyError(f"unknown scoring scope {scope!r}; expected one of {SCOPES}")

    @per_instance
    def text_scores(self, split: str, name: str, scope: str):
        """A window ranker's judgments of one scope's inputs, made (or read from its cache) by its kind.

        Judgments read whole from the score store (none made now, none unavailable) are final until the store
        changes, so they are kept in the memo under the judge, the inputs and the store's generation: a warm
        run reads one file instead of decoding and checking every stored row (docs/protocol.md#caches)."""
        decl = self.decl(name)
        inputs = self.inputs(split, name, scope)
        identity = self._declared(decl, "cannot identify its judgments",
                                  lambda: decl.ranker_kind.identity(decl, self.context))
        texts = texts_digest(inputs)
        # One judging run per (identity, split, scope, inputs) across xdist workers: the second waits, then reads.
        lock = self.settings.cache("scores") / f".{split}-{scope}-{parts_digest([identity, texts])}.lock"
        desc = f"score {name} {scope} {split}"
        with FileLock(str(lock)), self.stage(split, f"score_{name}_{scope}", inputs=len(inputs)) as record:
            def judge() -> ScoredInputs:
                self._stored_only(decl, inputs, desc)
                self._within_budget(decl, inputs, desc)
                return decl.ranker_kind.judge(decl, self.context, inputs, desc=desc)

            parts = {"judge": identity, "scope": scope, "inputs": texts,
                     "store": score_store(self.context).generation()}
            scored = self.memo.get("judgments", parts, judge, keep=lambda s: s.n_scored == 0 and s.n_unavailable == 0)
            record.update(unique=scored.n_unique, scored_now=scored.n_scored, retried=scored.n_retried,
                          rejected=scored.n_rejected, unavailable=scored.n_unavailable, capped=scored.n_capped)
        return scored

    def judged_from_store(self, decl: RankerDecl) -> bool:
        """Whether the score store holds judgments of this window ranker's judge (one indexed probe, no pool): then
        its server need not answer when every judgment the run needs is stored, e.g. imported from a batch
        (docs/protocol.md#batch-files); ``_stored_only`` checks that before its stage judges."""
        if not decl.is_window or not (self.settings.cache_dir / "scores" / CACHE_FILE).is_file():
            return False
        try:
            key = decl.ranker_kind.judge_key(decl, self.context)
        except Exception:  # a judge that cannot be keyed without its server: refused as its server check says
            return False
        return key is not None and score_store(self.context).holds(key)

    def _stored_only(self, decl: RankerDecl, inputs: list[TextInput], desc: str) -> None:
        """A ranker whose server did not answer at the start judges nothing: a judgment the store lacks (or holds
        unavailable) fails its rows with its server check's message before any request is sent."""
        message = self.offline.get(decl.name)
        if message is None:
            return
        plan = self._declared(decl, "cannot plan its judgments",
                              lambda: decl.ranker_kind.plan(decl, self.context, inputs))
        if plan is None or plan.to_judge:
            missing = ("its stored judgments cannot be counted" if plan is None else
                       f"{plan.to_judge:,} of the {plan.judgments:,} judgments of {desc} are not stored")
            raise KindBuildError(f"{message}; {missing}, and nothing was sent")

    def _within_budget(self, decl: RankerDecl, inputs: list[TextInput], desc: str) -> None:
        """Print what the stage will cost before it judges, and stop it when it exceeds ``--max-judge-minutes``
        (docs/protocol.md#judging-cost). Without history, and with a limit, a few judgments are timed first."""
        limit = self.settings.max_judge_minutes
        plan = self._declared(decl, "cannot plan its judgments",
                              lambda: decl.ranker_kind.plan(decl, self.context, inputs))
        if plan is None:
            return
        if limit is not None and plan.to_judge and plan.seconds_per_judgment is None and plan.probe is not None:
            progress.note(f"plan {desc}: no stored judgment of this judge yet; timing a few before the estimate")
            self._declared(decl, "cannot time its judgments", plan.probe)
            plan = decl.ranker_kind.plan(decl, self.context, inputs)
        if plan.to_judge:  # a warm stage (everything cached) stays quiet
            progress.note(plan.line(desc))
        if limit is not None and plan.estimate_s is not None and plan.estimate_s > 60 * limit:
            raise OverBudget(f"{self.where(decl)}: {desc} is estimated at {plan.estimate_s / 60:.1f} min "
                             f"({plan.to_judge:,} judgments at {plan.seconds_per_judgment:.3g} s), over "
                             f"--max-judge-minutes {limit:g}: stopped before judging, so none of its rows is "
                             "evaluated (raise the limit, or judge on a faster server)")

    @per_instance
    def window_scores(self, split: str, name: str, scope: str | None = None) -> dict[tuple[str, str], float]:
        """(qid, pid) -> the score the window rule reads: its kind's reading of its window's or pairs' judgments
        (``scope`` "pair" reads the designated pairs' of any window ranker, as Table III's pair-only row does)."""
        decl = self.decl(name)
        scope = scope or ("pair" if decl.designated_only else "window")
        return decl.ranker_kind.read(decl, self.text_scores(split, name, scope))
