"""A researcher's own ranker as Python code: ``package.module:factory`` (``kind = "python"``).

The factory (any callable: a function or a class, optionally a dotted attribute path such as
``pkg.mod:Reranker.from_config``) is called with the profile's keyword options and returns one of:

- a :class:`~rankers.scorers.base.TextScorer` (``model_key`` + ``score(inputs) -> ScoreBatch``):
  a window scorer. It goes through the window procedure like the suite's cross-encoder, and
  sees nothing but (query, passage) text. ``score`` may also return a plain sequence of floats;
  a NaN then becomes an unavailable score with a reason, and the window falls back for its query;
- a :class:`PoolScorer` (``model_key`` + ``score_pool(pool, queries, corpus) -> array``): a
  full-pool scorer, one finite score per pool row, ranked like E0 with key ``(score, 0, 0)``. It sees
  the pool's ids and route scores/ranks (never labels or pair identities), the query texts and
  the passage texts of the pool. What it returns is checked against that contract (``pool_scores``):
  a 1-D array or list of ``len(pool)`` finite numbers in the pool's row order, or a pandas Series
  on the pool's own index (re-ordered to it); anything else is refused, never guessed.

An object offering both methods is refused as ambiguous. The cache key of a declared scorer
names the declaration, its options, the code identity of the factory's module (its source and
every module it imports from its folder, with the libraries' versions: ``factory_code``) and the
object's own ``model_key``, so changing any of them never reuses stale scores
(docs/protocol.md#caches).

Every failure raises :class:`ScorerDeclarationError` naming the declaration: a malformed
string, a module that is missing or fails to import, a missing or non-callable attribute, a
factory that raises (the original exception chained), a returned object of neither shape, a
batch of the wrong length, and pool scores of the wrong length or non-finite. A scorer that
raises while scoring is a bug in the declared code, not an unavailable score: it stops the run
with that error, and the score cache keeps every batch finished before it.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from fixtures.code import own_code_identity
from fixtures.identity import compact_json_digest
from fixtures.routes import POOL_COLUMNS
from rankers.base import Ranking, single_score_ranking
from rankers.scorers.base import DeclaredKey, ScoreBatch, TextScorer

_IDENT = r"[A-Za-z_]\w*"
_SPEC = re.compile(rf"^({_IDENT}(?:\.{_IDENT})*):({_IDENT}(?:\.{_IDENT})*)$")


class ScorerDeclarationError(ValueError):
    """A ``python`` ranker declaration cannot give a usable scorer; the message names the declaration."""


@runtime_checkable
class PoolScorer(Protocol):
    """Scores every row of a pool at once; ``model_key`` names everything that changes a score."""

    @property
    def model_key(self) -> str:
        ...

    def score_pool(self, pool: pd.DataFrame, queries: Mapping[str, str], corpus: Mapping[str, str]) -> np.ndarray:
        """One finite score per row of ``pool`` (aligned with it), higher is better."""
        ...


def _label(spec: str, ranker: str | None) -> str:
    return f"python ranker {ranker!r} ({spec!r})" if ranker else f"python scorer {spec!r}"


def _options_key(options: Mapping[str, Any]) -> str:
    return json.dumps(dict(options), sort_keys=True, separators=(",", ":"), default=repr)


def factory_code(spec: str) -> dict[str, object] | None:
    """The code identity of the factory's module (``fixtures.code.own_code_identity``), read from its files
    without running it; None when the module cannot be found (preflight names that problem)."""
    return own_code_identity(spec.strip().split(":", 1)[0]) if isinstance(spec, str) else None


def _key_parts(spec: str, options: Mapping[str, Any], code: str, scorer_key: str) -> dict[str, str]:
    """A python scorer's key parts: the factory, its options, its code and the object's own ``model_key``."""
    return {"judge": "python", "factory": spec, "options": _options_key(options), "code": f"code:{code}",
            "scorer": scorer_key}


def _code_key(spec: str) -> str:
    """The factory's code identity as a short digest, for the score-cache key."""
    return compact_json_digest(factory_code(spec))[:16]


class DeclaredTextScorer(DeclaredKey):
    """A declared ``TextScorer`` with the suite's checks: aligned batches, a reason for every missing score."""

    def __init__(self, inner: TextScorer, spec: str, options: Mapping[str, Any], label: str, code: str) -> None:
        self.inner = inner
        self.spec = spec
        self.options = dict(options)
        self.label = label
        self._parts = _key_parts(spec, options, code, inner.model_key)

    def key_parts(self) -> dict[str, str]:
        return self._parts

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        pairs = [(str(q), str(p)) for q, p in inputs]
        try:
            out = self.inner.score(pairs)
        except Exception as exc:
            raise ScorerDeclarationError(f"{self.label}: score() raised {type(exc).__name__}: {exc}") from exc
        if isinstance(out, ScoreBatch):
            scores, errors, usage, raw = _numbers(out.scores, self.label), list(out.errors), out.usage, out.raw
        else:
            scores = _numbers(out, self.label)
            errors, usage, raw = [None] * (len(scores) if scores.ndim == 1 else 0), [], []
        if scores.shape != (len(pairs),) or len(errors) != len(pairs):
            raise ScorerDeclarationError(f"{self.label}: score() returned {scores.shape} scores and {len(errors)} "
                                         f"errors for {len(pairs)} inputs")
        usage = list(usage)
        for i, (s, e) in enumerate(zip(scores, errors)):
            if not np.isfinite(s) and e is None:  # the suite's own reason, with its cause (the scorer gave none)
                usage = usage or [{} for _ in pairs]
                errors[i] = f"non-finite score {float(s)!r} from {self.spec}"
                usage[i] = {**usage[i], "cause": "non-finite score"}
        return ScoreBatch(scores, errors, usage, list(raw))


def _numbers(out: object, label: str) -> np.ndarray:
    """What ``score()`` returned as floats: numbers only (NaN and None are unavailable scores, with a reason); text,
    numeric ("59") or not, is refused, never parsed: a reply to parse is an LLM judge's
    (docs/kinds.md#objects-as-they-come)."""
    try:
        values = np.asarray(out)
    except Exception as exc:  # noqa: BLE001 - whatever it is, the message says what it was
        raise ScorerDeclarationError(f"{label}: score() returned {type(out).__name__}, neither a ScoreBatch nor a "
                                     "sequence of floats") from exc
    numeric = values.dtype.kind in "biuf" or (values.dtype.kind == "O" and values.ndim == 1 and all(
        v is None or isinstance(v, (int, float, np.number)) for v in values))
    if not numeric:
        raise ScorerDeclarationError(f"{label}: score() returned {type(out).__name__} of {values.dtype} values, "
                                     "neither a ScoreBatch nor a sequence of floats (text is refused, numeric or "
                                     "not: return numbers)")
    return np.asarray(values, dtype=float) if values.dtype.kind != "O" else \
        np.array([np.nan if v is None else float(v) for v in values])


@dataclass(frozen=True)
class LoadedScorer(DeclaredKey):
    """What a declaration gave: a window scorer (a checked ``TextScorer``) or a full-pool ``PoolScorer``."""

    spec: str
    is_window: bool
    scorer: DeclaredTextScorer | PoolScorer
    options: Mapping[str, Any]
    label: str
    code: str

    def key_parts(self) -> dict[str, str]:
        if self.is_window:  # the declared window scorer's key names its factory, options and code already
            return {"scorer": self.scorer.model_key}
        return _key_parts(self.spec, self.options, self.code, self.scorer.model_key)


def _import(spec: str, label: str) -> Any:
    match = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    if match is None:
        raise ScorerDeclarationError(f"{label}: declaration must look like 'package.module:factory' "
                                     "(a module path, one colon, an attribute path)")
    module_name, attr_path = match.groups()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        parts = module_name.split(".")
        if exc.name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
            raise ScorerDeclarationError(f"{label}: module {module_name!r} not found (install it, or name its folder "
                                         "in the profile's [profile] pythonpath)") from exc
        raise ScorerDeclarationError(f"{label}: importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise ScorerDeclarationError(f"{label}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    target: Any = module
    for i, part in enumerate(attr_path.split(".")):
        if not hasattr(target, part):
            where = module_name + ("." + ".".join(attr_path.split(".")[:i]) if i else "")
            raise ScorerDeclarationError(f"{label}: {where!r} has no attribute {part!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ScorerDeclarationError(f"{label}: {attr_path!r} is a {type(target).__name__}, not a callable factory")
    return target


def factory_problem(spec: str) -> str | None:
    """Why ``spec`` cannot give a factory, found without running the factory's module (None: it looks sound).

    Checked before any work: the declaration's form, that the module is found on ``sys.path``
    (the profile's ``pythonpath`` included; parent packages are imported to look inside them), that
    its source parses, defines the factory's first name, and that each package it imports at its top
    level is installed. Only running the module proves more, and that happens when the ranker is built.
    """
    match = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    if match is None:
        return f"factory {spec!r} must look like 'package.module:factory' (a module path, one colon, an attribute)"
    module_name, attr_path = match.groups()
    try:
        found = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:  # a parent package that is not there
        found = None
    except Exception as exc:  # noqa: BLE001 - a parent package that fails to import
        return f"factory {spec!r}: module {module_name!r} cannot be looked up ({type(exc).__name__}: {exc})"
    if found is None:
        return (f"factory {spec!r}: module {module_name!r} is not found on sys.path; name the folder that holds it "
                "in the profile's [profile] pythonpath (relative to the profile file), or install it")
    if not found.origin or not found.origin.endswith(".py"):
        return None  # an extension or namespace module: only importing it can tell more
    origin = Path(found.origin)
    try:
        tree = ast.parse(origin.read_text(encoding="utf-8"), str(origin))
    except SyntaxError as exc:
        return f"factory {spec!r}: {origin}:{exc.lineno}: syntax error: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"factory {spec!r}: cannot read {origin} ({exc})"
    defined: set[str] = set()
    star = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            star |= any(a.name == "*" for a in node.names)
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            roots = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if node.module and node.level == 0 else []
            for root in (r.split(".")[0] for r in roots):
                if importlib.util.find_spec(root) is None:
                    return (f"factory {spec!r}: {origin}:{node.lineno} imports {root!r}, which is not installed "
                            "(pip install it, or add its folder to the profile's pythonpath)")
    first = attr_path.split(".")[0]
    if first not in defined and not star and not origin.name == "__init__.py":
        return f"factory {spec!r}: {origin} defines no {first!r} at its top level"
    return None


def load_python_scorer(spec: str, options: Mapping[str, Any] | None = None, *, ranker: str | None = None
                       ) -> LoadedScorer:
    """Import ``spec``, call the factory with ``options`` as keywords, and say which shape it returned."""
    label = _label(spec, ranker)
    options = dict(options or {})
    factory = _import(spec, label)
    try:
        obj = factory(**options)
    except Exception as exc:
        raise ScorerDeclarationError(f"{label}: the factory raised {type(exc).__name__}: {exc}") from exc
    return _checked(obj, spec, options, label, _code_key(spec))


def object_spec(obj: object) -> str:
    """What names an object handed over in Python (``evaluate(add=...)``): a function as ``module:qualname``, any
    other object by its class."""
    named = obj if isinstance(obj, (types.FunctionType, types.MethodType)) else type(obj)
    return f"{named.__module__}:{named.__qualname__.replace('.<locals>.', '.')}"


def object_code(obj: object) -> str:
    """The code key of an object handed over in Python: its class's module (its source and what it imports from its
    folder, like a factory's) when that module is a file on ``sys.path``; else the class's own source (a notebook
    cell); else its qualified name alone, so that ``model_key`` must then name every change
    (docs/kinds.md#what-keys-its-scores).
    A function's or a library object's derived ``model_key`` names its code already (``rankers.scorers.objects``)."""
    from rankers.scorers.objects import of_installed_library  # what an installed library's object is

    if isinstance(obj, (types.FunctionType, types.MethodType)) or of_installed_library(obj):
        return "in-model-key"
    module = type(obj).__module__
    identity: object = own_code_identity(module) if module != "__main__" else None
    if identity is None:
        try:
            identity = {"class_source": inspect.getsource(type(obj))}
        except (OSError, TypeError):
            identity = {"class": object_spec(obj)}
    return compact_json_digest(identity, default=str)[:16]


def load_python_object(obj: object, *, ranker: str) -> LoadedScorer:
    """An object handed over in Python as a ranker (``evaluate(add={ranker: obj})``), checked as a factory's
    return value is."""
    spec = object_spec(obj)
    return _checked(obj, spec, {}, f"python ranker {ranker!r} (an object of {spec!r})", object_code(obj))


def object_is_window(obj: object) -> bool:
    """Whether an object handed over in Python scores windows (``score``) rather than whole pools (``score_pool``)."""
    return not callable(getattr(obj, "score_pool", None))


def _checked(obj: object, spec: str, options: Mapping[str, Any], label: str, code: str) -> LoadedScorer:
    """A pool scorer, or anything ``rankers.scorers.objects`` reads as a text scorer, with a usable ``model_key``;
    refused naming ``label`` and what is accepted otherwise."""
    from rankers.scorers.objects import Unkeyable, as_text_scorer  # torch models handed over are keyed there

    is_pool = not object_is_window(obj)
    if is_pool and callable(getattr(obj, "score", None)):
        raise ScorerDeclarationError(f"{label}: the factory returned a {type(obj).__name__} with both score() and "
                                     "score_pool(); return one (a text scorer or a pool scorer)")
    scorer = obj
    if not is_pool:
        try:
            scorer = as_text_scorer(obj, label)
        except (TypeError, Unkeyable) as exc:
            raise ScorerDeclarationError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a library object that cannot be read (e.g. a multi-logit head)
            raise ScorerDeclarationError(f"{label}: {type(exc).__name__}: {exc}") from exc
    try:
        key = scorer.model_key
    except Exception as exc:
        raise ScorerDeclarationError(f"{label}: reading model_key raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(key, str) or not key.strip():
        raise ScorerDeclarationError(f"{label}: model_key must be a non-empty string naming the model, its revision "
                                     f"and every setting that changes a score; got {key!r}")
    if is_pool:
        return LoadedScorer(spec, False, obj, options, label, code)
    return LoadedScorer(spec, True, DeclaredTextScorer(scorer, spec, options, label, code), options, label, code)


def pool_scores(loaded: LoadedScorer, pool: pd.DataFrame, queries: Mapping[str, str],
                corpus: Mapping[str, str]) -> np.ndarray:
    """The pool scorer's checked scores, aligned with ``pool``.

    It receives a copy of the pool's ids and route columns only, and the texts of the
    pool's queries and passages only.
    """
    if loaded.is_window:
        raise ValueError(f"{loaded.label} is a window (text) scorer, not a pool scorer")
    qids, pids = pd.unique(pool["qid"]), pd.unique(pool["pid"])
    missing_q = [q for q in qids if q not in queries]
    missing_p = [p for p in pids if p not in corpus]
    if missing_q or missing_p:
        raise KeyError(f"{loaded.label}: {len(missing_q)} pool qids lack query text (e.g. {missing_q[:3]}), "
                       f"{len(missing_p)} pool pids lack passage text (e.g. {missing_p[:3]})")
    view = pool[[c for c in POOL_COLUMNS if c in pool.columns]].reset_index(drop=True).copy()
    try:
        out = loaded.scorer.score_pool(view, {q: queries[q] for q in qids}, {p: corpus[p] for p in pids})
    except Exception as exc:
        raise ScorerDeclarationError(f"{loaded.label}: score_pool() failed: {type(exc).__name__}: {exc}") from exc
    scores = _pool_return(out, view.index, loaded.label)
    bad = ~np.isfinite(scores)
    if bad.any():
        example = pool.loc[pool.index[bad], ["qid", "pid"]].head(3).to_dict("records")
        raise ScorerDeclarationError(f"{loaded.label}: score_pool() returned {int(bad.sum())} non-finite scores, "
                                     f"e.g. {example}")
    return scores


_CONTRACT = "return one number per pool row, in the pool's row order (a 1-D array or list, or a Series on its index)"


def _pool_return(out: object, index: pd.Index, label: str) -> np.ndarray:
    """``score_pool``'s return as floats aligned with the pool's rows, or an error saying what was wrong."""
    what = type(out).__name__
    if isinstance(out, pd.DataFrame) or isinstance(out, (Mapping, str, bytes)) or out is None:
        raise ScorerDeclarationError(f"{label}: score_pool() returned a {what}; {_CONTRACT}")
    if isinstance(out, pd.Series):
        if not out.index.equals(index):
            if out.index.has_duplicates or set(out.index) != set(index):
                raise ScorerDeclarationError(f"{label}: score_pool() returned a Series whose index is not the "
                                             f"pool's (0..{len(index) - 1}); {_CONTRACT}")
            out = out.loc[index]
        out = out.to_numpy()
    try:
        scores = np.asarray(out)
    except Exception as exc:  # noqa: BLE001 - whatever the object is, the message says what it was
        raise ScorerDeclarationError(f"{label}: score_pool() returned a {what} that is not an array "
                                     f"({type(exc).__name__}: {exc}); {_CONTRACT}") from exc
    if scores.dtype.kind not in "biuf":
        raise ScorerDeclarationError(f"{label}: score_pool() returned a {what} of {scores.dtype} values, not "
                                     f"numbers; {_CONTRACT}")
    if scores.shape != (len(index),):
        raise ScorerDeclarationError(f"{label}: score_pool() returned shape {scores.shape} for {len(index)} "
                                     f"pool rows; {_CONTRACT}")
    return scores.astype(float)


def pool_ranking(loaded: LoadedScorer, pool: pd.DataFrame, queries: Mapping[str, str], corpus: Mapping[str, str],
                 name: str) -> Ranking:
    """The pool ordered by the declared pool scorer: key ``(score, 0, 0)``, ties by pid for position only."""
    return single_score_ranking(pool, pool_scores(loaded, pool, queries, corpus), name,
                                model_key=loaded.model_key, declaration=loaded.spec)
