"""The pointwise window kind: each (query, passage) input judged on its own through the shared score cache.

A pointwise kind's scorer is shared between declarations with the same options and stands in lazily
(``rankers.kinds.base.LazyScorer``: a warm run reads its cache key from the memo and never loads the model);
only what the cache lacks is scored (``rankers.scorers.cache``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixtures.artifacts import sha256_file
from fixtures.models import model_fingerprint
from rankers.kinds.base import (Context, DeclarationError, KindBuildError, LazyScorer, RankerDecl, WindowKind,
                                 score_store)
from rankers.kinds.plan import CHARS_PER_TOKEN, PROBE_JUDGMENTS, JudgePlan, timed_history
from rankers.scorers.base import TextScorer
from rankers.shipped import ShippedJudgments

#: Inputs per committed chunk for scorers that do not choose their own (a multiple of the window, 20).
CHUNK = 60
#: Options that say how judgments are stored, not how they are made: they stay out of a scorer's identity.
STORAGE_OPTIONS = ("max_reply_chars",)


class PointwiseKind(WindowKind):
    """Judges each (query, passage) input on its own, through the shared score cache.

    A subclass builds the scorer (``build``); this class shares one scorer between declarations
    with the same options, stands in for it lazily (a warm run reads its cache key from the memo
    and never loads the model), and scores what the cache lacks.
    """

    pointwise = True

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        raise NotImplementedError

    def identity(self, decl: RankerDecl, ctx: Context) -> dict[str, Any]:
        """Code, libraries, options and the bytes of a local model: everything that decides the scorer's key."""
        identity: dict[str, Any] = {"kind": self.name, "options": decl.scorer_options, **self.code()}
        files = local_files(str(decl.options.get("model", "")), ctx.cache())
        if files is not None:
            identity["model_files"] = files
        return identity

    def scorer(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        key = (decl.kind, tuple(sorted((k, repr(v)) for k, v in decl.scorer_options.items())))

        def build() -> TextScorer:
            try:
                return ctx.shared(key, lambda: self.build(decl, ctx))
            except Exception as exc:  # any failure of a declared scorer is reported against its declaration
                raise KindBuildError(f"{ctx.where(decl)}: cannot build its scorer: {type(exc).__name__}: {exc}") \
                    from exc

        try:
            identity = self.identity(decl, ctx)
        except Exception as exc:  # e.g. a model folder that cannot be read
            raise KindBuildError(f"{ctx.where(decl)}: cannot identify its scorer: {type(exc).__name__}: {exc}") \
                from exc
        shipped = ShippedJudgments.find(identity) if ctx.shipped else None
        if shipped is not None:  # the study's judgments ship with the checkout: no model is trained or loaded
            model_key = shipped.model_key
            ctx.shared(("shipped-judgments", model_key), lambda: shipped.install(score_store(ctx)))
        else:
            model_key = ctx.memo("scorer-key", identity, lambda: build().model_key)
        return ctx.shared(("lazy", *key), lambda: LazyScorer(model_key, build,
                                                             lambda: ctx.forget("scorer-key", identity)))

    def scorer_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """All but the storage options (``max_reply_chars``): two declarations differing only there share judgments."""
        return {k: v for k, v in options.items() if k not in STORAGE_OPTIONS}

    def plan_inputs(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]]) -> JudgePlan:
        """The plan of judging ``inputs`` one by one: the distinct inputs the cache lacks (or holds unavailable),
        their texts' tokens, and the judge's history; ``probe`` scores :data:`PROBE_JUDGMENTS` of them."""
        from rankers.scorers.judgments import held  # sqlite store, no model
        from rankers.scorers.pointwise import point_requests, score_with_cache  # the judging loop, no model

        cache = score_store(ctx)
        scorer = self.scorer(decl, ctx)
        rows, keys, _ = point_requests(scorer.model_key, inputs)
        unique = dict(zip(keys, rows))
        missing = [unique[key] for key in held(cache, unique).todo]
        seconds, history = timed_history(cache, scorer.model_key)
        return JudgePlan(len(unique), len(unique) - len(missing),
                         sum(len(qt) + len(pt) for _, _, qt, pt in missing) // CHARS_PER_TOKEN, seconds, history,
                         probe=lambda: score_with_cache(scorer, missing[:PROBE_JUDGMENTS], cache, progress=False))

    def judge(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]], desc: str) -> Any:
        from rankers.scorers.cache import MAX_REPLY_CHARS  # sqlite store, no model
        from rankers.scorers.pointwise import score_with_cache  # the judging loop, no model

        cache = score_store(ctx)
        return score_with_cache(self.scorer(decl, ctx), inputs, cache, batch_size=CHUNK, desc=desc,
                                max_reply_chars=int(decl.options.get("max_reply_chars", MAX_REPLY_CHARS)))


def check_reply_cap(options: Mapping[str, Any], where: str) -> None:
    """``max_reply_chars``, where declared, is a positive integer (characters of a reply stored per input)."""
    value = options.get("max_reply_chars")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise DeclarationError(f"{where}: max_reply_chars must be a positive integer (characters of a reply "
                               f"stored per input), got {value!r}")


def local_files(value: str, cache_dir: Path | None = None) -> object | None:
    """The content identity of a local model folder (per-file digests) or file (sha256); None for a hub name."""
    if not value:
        return None
    local = Path(value).expanduser()
    if local.is_dir():
        return model_fingerprint(str(local.resolve()), cache_dir)
    if local.is_file():
        return sha256_file(local)
    return None
