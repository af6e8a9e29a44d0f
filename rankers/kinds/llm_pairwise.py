"""``kind = "llm_pairwise"``: an LLM that compares two passages at a time, PRP-style (``docs/protocol.md#pairwise``).

Each comparison is asked in both orders. ``algorithm = "allpair"`` (default) compares every pair of the
reference's top ``window`` passages (k(k-1) judgments; 380 for the whole 20-passage window) and scores a
passage by its wins, 0.5 per inconsistent pair: equal wins are ties of the window rule, broken by its
tie-breaker. ``algorithm = "sliding"`` runs ``passes`` bubble passes from the bottom up (PRP-Sliding-K;
fewer judgments, and a comparison that recurs is judged once); score = -position.

``mode = "designated"`` asks only about each direction's two designated passages, in both orders: two
judgments per direction, the cheapest strict-preference measurement there is. It measures the direct
comparison of the pair (its consistent winner, or a tie when the two orders disagree, which the tie-breaker
decides), not the pair's order in an all-pair or sliding window, where each passage's place also depends on
its comparisons with the other passages.

Backends: those of ``llm_listwise`` (``llamacpp`` reads the answer tokens' logits; ``vllm`` and ``openai``
generate the answer).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rankers.kinds.base import Context, DeclarationError, RankerDecl, register
from rankers.kinds.llm_listwise import LLM_OPTIONS, LLMJudgeKind, positive
from rankers.scorers.judgment_records import Request
from rankers.scorers.pairwise import ANSWER_MAX_TOKENS, PairwiseJudge, allpair, sliding
from rankers.window import WINDOW_K

ALGORITHMS = ("allpair", "sliding")


class LLMPairwise(LLMJudgeKind):
    name = "llm_pairwise"
    options = {**LLM_OPTIONS, "algorithm": (str,), "passes": (int,)}
    doc = "an LLM that compares two passages in both orders (PRP: all pairs or sliding bubble passes)"

    def check(self, options, where: str) -> None:
        super().check(options, where)
        algorithm = options.get("algorithm", "allpair")
        if algorithm not in ALGORITHMS:
            raise DeclarationError(f"{where}: algorithm must be one of {list(ALGORITHMS)}, got {algorithm!r}")
        if "passes" in options and algorithm != "sliding":
            raise DeclarationError(f"{where}: passes applies to algorithm = 'sliding' only")
        positive(options, "passes", where)

    def make_judge(self, decl: RankerDecl, ctx: Context):
        budgets = {k: decl.options[k] for k in ("prompt", "passage_tokens", "query_tokens") if k in decl.options}
        return PairwiseJudge(self.backend(decl, ctx, default_max_tokens=ANSWER_MAX_TOKENS), **budgets)

    @staticmethod
    def placeholder(request: Request) -> Any:
        """Passage A."""
        return 0

    def algorithm(self, decl: RankerDecl, query: str, items: Sequence[tuple[str, str]]):
        window = int(decl.options.get("window", WINDOW_K))
        if decl.options.get("algorithm", "allpair") == "sliding":
            return sliding(query, items, window, int(decl.options.get("passes", 10)))
        return allpair(query, items, window)

    def checked(self, decl: RankerDecl, ctx: Context, windows) -> list[str]:
        """No reversed windows: asking every comparison in both orders is the pairwise order check."""
        return []


register(LLMPairwise())
