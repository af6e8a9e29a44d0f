"""``kind = "llm_listwise"``: an LLM that orders a whole window at once, RankGPT-style.

See ``docs/protocol.md#listwise``.

The reference's top ``window`` passages (default 20: the whole window) go to the model as one list with
identifiers [1]..[n] in the reference's order; a window longer than ``sub_window`` is ranked by sliding
sub-windows of that size, ``step`` apart, back to front (RankGPT: 20 and 10 over a top 100). The returned
permutation is the head's order (text score = -position); passages of the window below ``window`` keep the
reference's order under them. ``order_check = N`` also judges N windows per split presented in reverse, to
measure how much the model's answer depends on the input order (``reports/order_bias.py``).

Backends: ``llamacpp`` (a GGUF in-process, greedy decoding), ``vllm``, ``openai`` (any OpenAI-compatible
server at ``url``): the grader's backends and generation settings (``rankers.kinds.llm``); and
``rerankers``: the listwise types of the ``rerankers`` library (``model_type = "rankgpt"`` through LiteLLM,
``"rankllm"`` through rank_llm), which rank on their own and report no repairs.

This module also holds what the pairwise kind shares with it: the judge's options, their checks and the judging.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from rankers.kinds.base import Context, DeclarationError, RankerDecl, WindowKind, register, score_store
from rankers.kinds.llm import BACKEND_OPTIONS, BACKENDS, LLMBackendKind, check_backend, check_server
from rankers.kinds.plan import CHARS_PER_TOKEN, PROBE_JUDGMENTS, JudgePlan, timed_history
from rankers.kinds.requirements import Requirement, needs_module
from rankers.scorers.judgment_records import Request
from rankers.scorers.judgments import drive, group_windows, judge_now, plan_requests, scored_inputs
from rankers.scorers.listwise import TOKENS_PER_ID, ListwiseJudge, RerankersListJudge, sliding_windows
from rankers.window import WINDOW_K

RERANKERS = needs_module("rerankers", "the rerankers package", "pip install -e \".[rerankers]\"")
#: What the ``rerankers`` library's listwise types import to run (looked up, never imported here).
RERANKERS_TYPES = {"rankgpt": needs_module("litellm", "litellm (rerankers' RankGPT client)",
                                           "pip install litellm, and give the API's key in options"),
                   "rankllm": needs_module("rank_llm", "rank_llm (rerankers' RankLLM models)",
                                           "pip install rank-llm on a GPU machine")}
#: Options every LLM judge takes: the backend's, the prompt's budgets and the window it judges.
LLM_OPTIONS = {**BACKEND_OPTIONS, "prompt": (str,), "passage_tokens": (int,), "query_tokens": (int,),
               "window": (int,)}
#: Options that shape the algorithm or the report, not a judgment's prompt or reading.
ALGORITHM_KEYS = ("window", "sub_window", "step", "order_check", "algorithm", "passes")


def positive(options: Mapping[str, Any], key: str, where: str, most: int | None = None) -> None:
    value = options.get(key)
    if value is not None and (value < 1 or (most is not None and value > most)):
        bound = f" and at most {most}" if most is not None else ""
        raise DeclarationError(f"{where}: {key} must be at least 1{bound}, got {value!r}")


class LLMJudgeKind(LLMBackendKind, WindowKind):
    """A window kind whose judgments are made by an LLM backend on several passages at once."""

    backends: tuple[str, ...] = BACKENDS

    def check(self, options, where: str) -> None:
        check_backend(options, where, self.backends)
        check_server(options, where, f"{self.name} server", url_needs_server=False)
        positive(options, "window", where, WINDOW_K)
        for key in ("passage_tokens", "query_tokens"):
            positive(options, key, where)

    def identity(self, decl: RankerDecl, ctx: Context) -> dict[str, Any]:
        return {"kind": self.name, "options": dict(decl.options), **self.code()}

    # ---- building --------------------------------------------------------------------------------------------

    def backend(self, decl: RankerDecl, ctx: Context, default_max_tokens: int | None = None):
        """The declared LLM backend with the grader's generation settings (``max_tokens`` defaulted by the kind)."""
        options = {k: v for k, v in decl.options.items() if k in BACKEND_OPTIONS}
        if options["backend"] == "llamacpp":
            options.setdefault("thinking", False)
        if default_max_tokens is not None and "max_tokens" not in options and options.get("thinking") is False:
            options["max_tokens"] = default_max_tokens  # a thinking model keeps the grader's 6,144-token cap
        return self.make_backend(decl, ctx, options)

    def make_judge(self, decl: RankerDecl, ctx: Context):
        raise NotImplementedError

    def algorithm(self, decl: RankerDecl, query: str, items: Sequence[tuple[str, str]]):
        raise NotImplementedError

    def judge_of(self, decl: RankerDecl, ctx: Context):
        """One judge per distinct declaration options in the session (twins with equal options share it)."""
        key = (self.name, tuple(sorted((k, repr(v)) for k, v in decl.options.items() if k not in ALGORITHM_KEYS)))
        return ctx.shared(key, lambda: self.make_judge(decl, ctx))

    # ---- judging ---------------------------------------------------------------------------------------------

    def judge_key(self, decl: RankerDecl, ctx: Context) -> str:
        return self.judge_of(decl, ctx).model_key

    def judge(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]], desc: str) -> Any:
        judge = self.judge_of(decl, ctx)
        planned = self.plan(decl, ctx, inputs)
        driven = drive(judge, score_store(ctx), self.algorithms(decl, ctx, inputs), desc, planned=planned.to_judge)
        return scored_inputs(inputs, driven, judge.model_key)

    @staticmethod
    def placeholder(request: Request) -> Any:
        """A neutral answer standing in for a judgment not yet made while planning (``plan_requests``)."""
        raise NotImplementedError

    def plan(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]]) -> JudgePlan:
        """Every distinct judgment the windows' algorithms will ask for (docs/protocol.md#judging-cost): later
        rounds counted with placeholder answers; ``probe`` judges :data:`PROBE_JUDGMENTS` of the next steps."""
        judge, cache = self.judge_of(decl, ctx), score_store(ctx)
        cached, todo, pending = plan_requests(judge.model_key, cache, self.algorithms(decl, ctx, inputs),
                                              self.placeholder)
        chars = sum(len(r.query) + sum(len(t) for _, t in r.items) for r in todo.values())
        seconds, history = timed_history(cache, judge.model_key)
        first = dict(list(pending.items())[:PROBE_JUDGMENTS])
        return JudgePlan(cached + len(todo), cached, chars // CHARS_PER_TOKEN, seconds, history,
                         probe=lambda: judge_now(judge, cache, first))

    def algorithms(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]]) -> dict:
        """One algorithm per window of ``inputs`` (and per reversed window of the order check), keyed (qid, variant):
        what the judging run drives, and what a batch export advances through the cache (``harness.batch``)."""
        ranks = self._reference_ranks(decl, ctx, {str(i[0]) for i in inputs})
        windows = group_windows(inputs, lambda q, p: ranks.get((q, p), float("inf")))
        algorithms = {(qid, "main"): self.algorithm(decl, query, items) for qid, (query, items) in windows.items()}
        for qid in self.checked(decl, ctx, windows):
            query, items = windows[qid]
            algorithms[(qid, "reversed")] = self.algorithm(decl, query, self.reversed(decl, items))
        return algorithms

    def checked(self, decl: RankerDecl, ctx: Context, windows: Mapping[str, Any]) -> list[str]:
        """The windows of the order check: ``order_check`` of them per call, chosen by a seeded hash of the qid
        (never by labels)."""
        n = int(decl.options.get("order_check", 0))
        ranked = sorted(windows, key=lambda q: hashlib.sha256(f"{ctx.seed}:{q}".encode()).hexdigest())
        return ranked[:n]

    def reversed(self, decl: RankerDecl, items: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The window as the order check presents it: its judged part reversed, the rest as it was."""
        window = int(decl.options.get("window", WINDOW_K))
        return list(items[:window])[::-1] + list(items[window:])

    @staticmethod
    def _reference_ranks(decl: RankerDecl, ctx: Context, qids: set[str]) -> dict[tuple[str, str], float]:
        """(qid, pid) -> rank in the reference ranking: the order the model is shown (whatever order the inputs
        came in: a designated pair always arrives preferred first, and must not be shown so)."""
        directions = ctx.study.directions
        splits = sorted(set(directions.loc[directions["qid"].isin(qids), "split"]))
        ranks: dict[tuple[str, str], float] = {}
        for split in splits:
            frame = ctx.ranking(split, decl.reference).frame
            frame = frame[frame["qid"].isin(qids)]
            ranks.update(zip(zip(frame["qid"].astype(str), frame["pid"].astype(str)), frame["rank"].astype(float)))
        return ranks


class LLMListwise(LLMJudgeKind):
    name = "llm_listwise"
    options = {**LLM_OPTIONS, "backend": (str,), "sub_window": (int,), "step": (int,), "order_check": (int,),
               "model_type": (str,), "options": (dict,)}
    backends = (*BACKENDS, "rerankers")
    doc = "an LLM that returns a permutation of the window (RankGPT-style; llamacpp, vllm, openai or rerankers)"

    def check(self, options, where: str) -> None:
        super().check(options, where)
        positive(options, "sub_window", where, WINDOW_K)
        window = options.get("window", WINDOW_K)
        sub = options.get("sub_window", window)
        step = options.get("step", max(sub // 2, 1))
        if not 1 <= step <= sub:
            raise DeclarationError(f"{where}: step must be between 1 and sub_window ({sub}), got {step!r}")
        if options.get("order_check", 0) < 0:
            raise DeclarationError(f"{where}: order_check must be >= 0 windows, got {options['order_check']!r}")
        if options["backend"] == "rerankers":
            if options.get("model_type") not in RERANKERS_TYPES:
                raise DeclarationError(f"{where}: backend 'rerankers' needs model_type, one of "
                                       f"{sorted(RERANKERS_TYPES)}, got {options.get('model_type')!r}")
        elif "model_type" in options or "options" in options:
            raise DeclarationError(f"{where}: model_type and options apply to backend 'rerankers' only")

    def requirements(self, options) -> tuple[Requirement, ...]:
        if options.get("backend") == "rerankers":
            return (RERANKERS, RERANKERS_TYPES[options["model_type"]])
        return super().requirements(options)

    def make_judge(self, decl: RankerDecl, ctx: Context):
        options = decl.options
        if options["backend"] == "rerankers":
            return RerankersListJudge(str(options["model"]), str(options["model_type"]), options.get("options", {}))
        sub = options.get("sub_window", options.get("window", WINDOW_K))
        budgets = {k: options[k] for k in ("prompt", "passage_tokens", "query_tokens") if k in options}
        return ListwiseJudge(self.backend(decl, ctx, default_max_tokens=TOKENS_PER_ID * sub + 8), **budgets)

    @staticmethod
    def placeholder(request: Request) -> Any:
        """The input order."""
        return list(range(len(request.items)))

    def algorithm(self, decl: RankerDecl, query: str, items: Sequence[tuple[str, str]]):
        window = int(decl.options.get("window", WINDOW_K))
        sub = int(decl.options.get("sub_window", window))
        step = int(decl.options.get("step", max(sub // 2, 1)))
        return sliding_windows(query, items, window, sub, step)


register(LLMListwise())
