"""``kind = "python"``: a researcher's own ranker as ``package.module:factory`` (``rankers.scorers.python_scorer``).

The factory, called with the declaration's ``options`` as keywords, returns a text scorer
(``window = true``, the default: a window reranker through the score cache) or a full-pool scorer
(``window = false``). A full-pool ranking of user code is never memoized: its code may read anything.
The scorer's identity, and so its score-cache key, names the factory module's code identity (its source and
every module it imports from its folder, ``fixtures.code.own_code_identity``) beside the options, so an
edit re-scores although ``model_key`` stayed (docs/protocol.md#caches), and the loaded scorer's own ``model_key``,
asked of it on every run (the factory is called once per session even when every score is cached), so a key
changed with the weights it names re-scores. The factory's module is
found through ``sys.path``, which the profile's ``[profile] pythonpath`` folders lead; it is looked
up (not run) before any work, so a missing module or factory stops the run at once.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rankers.base import Ranking
from rankers.kinds.base import Context, KindBuildError, RankerDecl, missing_model_paths, register
from rankers.kinds.pointwise import PointwiseKind
from rankers.scorers.base import TextScorer


#: The option that marks a declaration made from an object handed over in Python, holding the ranker's name (set by
#: ``evaluate(add=...)``, never read from a profile file: the profile's key check refuses it there).
ADDED = "added"


class Python(PointwiseKind):
    name = "python"
    options = {"factory": (str,), "window": (bool,), "options": (dict,)}
    required = ("factory",)
    doc = "package.module:factory returning a text scorer (window = true) or a full-pool scorer"

    def is_window(self, options) -> bool:
        return bool(options.get("window", True))

    def preflight(self, options, splits: Sequence[str]) -> list[str]:
        from rankers.scorers.python_scorer import factory_problem  # a source lookup; the factory is not run

        if options.get(ADDED):  # an object handed over in Python: checked when it was added
            return []
        problem = factory_problem(options["factory"])
        return ([] if problem is None else [problem]) + missing_model_paths(options.get("options", {}), self.name)

    @staticmethod
    def loaded(decl: RankerDecl, ctx: Context, window: bool):
        """The factory's scorer, loaded once per (factory, options), checked to be of the declared shape."""
        from rankers.scorers.python_scorer import load_python_scorer  # user code: imported only when declared

        options = decl.options.get("options", {})
        if decl.options.get(ADDED):
            loaded = ctx.shared((ADDED, decl.options[ADDED]), lambda: _not_added(ctx.where(decl)))
        else:
            loaded = ctx.shared(("python", decl.options["factory"], repr(sorted(options.items()))),
                                lambda: load_python_scorer(decl.options["factory"], options, ranker=decl.name))
        if loaded.is_window != window:
            raise KindBuildError(f"{ctx.where(decl)}: factory {decl.options['factory']!r} returned a "
                                 f"{'window' if loaded.is_window else 'full-pool'} scorer, but the declaration says "
                                 f"window = {window}")
        return loaded

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        from rankers.scorers.python_scorer import pool_ranking  # user code: imported only when declared

        return pool_ranking(self.loaded(decl, ctx, window=False), ctx.pool(split), ctx.queries(split),
                            ctx.study.corpus_for(split), decl.name)

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        return self.loaded(decl, ctx, window=True).scorer

    def identity(self, decl: RankerDecl, ctx: Context) -> dict[str, Any]:
        """The declaration, its code and the loaded scorer's own ``model_key``, asked of it on every run: the factory
        is called (once per session) even when every score is cached, so a key that changed with the weights it
        names re-scores (docs/kinds.md#what-keys-its-scores)."""
        from rankers.scorers.python_scorer import factory_code  # a source lookup; the factory is not run

        loaded = self.loaded(decl, ctx, window=self.is_window(decl.options))
        code = loaded.code if decl.options.get(ADDED) else factory_code(decl.options["factory"])
        return {**super().identity(decl, ctx), "factory_code": code, "model_key": loaded.scorer.model_key}


def added_declaration(name: str, obj: object) -> dict[str, Any]:
    """The ``[rankers.<name>]`` table of an object handed over in Python (``evaluate(add={name: obj})``): a
    ``python`` ranker named by the object's class, of the shape the object has; the object itself is registered
    with the session under ``(ADDED, name)`` and never enters a key but through its ``model_key`` and code."""
    from rankers.scorers.python_scorer import object_is_window, object_spec  # user code's checks: only when added

    return {"kind": "python", "factory": object_spec(obj), "window": object_is_window(obj)}


def _not_added(where: str) -> Any:
    raise KindBuildError(f"{where}: declared as an object handed over in Python, but none was added to this session "
                         "(pass it to evaluate(add={name: object}))")


register(Python())
