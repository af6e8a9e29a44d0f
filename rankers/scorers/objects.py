"""Rankers as researchers already hold them: a library's reranker object or a plain function, scored through the
window rule with no wrapper (docs/kinds.md#objects-as-they-come).

``as_text_scorer`` turns what ``evaluate(add=...)`` or a ``python`` factory hands over into a text scorer
(``model_key`` and ``score(inputs)``), tried in this order:

- an object with ``score(inputs)`` (the suite's own protocol: one argument, a batch of (query, passage)): as it is;
- a ``sentence_transformers.CrossEncoder``: ``predict`` on the batch (a two-logit head read as logit 1 - logit 0);
- a ``rerankers`` ranker (what ``rerankers.Reranker(...)`` returns): ``rank`` per query, read as
  ``kind = "rerankers"`` reads it (``rankers.scorers.rerankers_scorer``);
- a FlagEmbedding reranker, or any object with ``compute_score(pairs)``: one call per batch;
- a plain function ``f(query, passages) -> scores``: one call per query with its distinct passages.

An object's own ``model_key`` is used where it has one. Otherwise the key is derived where the suite can know
everything that changes a score: a torch model's name and a digest of its weights *as loaded* (what its weights
files gave it, and any change made in memory since), the library's version and the settings it scores with; a
function's or a plain object's code and every value it reads (its defaults, closure, globals, attributes), each
keyed the same way. Where one of them cannot be known (a client of a remote API, an open file), the object is
refused before any work, asking for ``model_key`` by name and naming what could not be keyed.
"""
from __future__ import annotations

import inspect
import json
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from fixtures.code import own_code_identity
from fixtures.identity import bytes_digest, compact_json_digest, text_digest
from rankers.scorers.base import DeclaredKey, ScoreBatch, by_query

#: What ``add=`` and a factory accept, for the message that refuses anything else.
ACCEPTED = ("an object with score(inputs) (a batch of (query, passage) pairs in, one float per pair out), a "
            "sentence_transformers CrossEncoder, a rerankers Reranker, a FlagEmbedding reranker (compute_score), "
            "a function f(query, passages) -> one score per passage, or a pool scorer (score_pool)")
#: How deep the values a function or object reads are followed (a helper calling a helper calling a model).
DEPTH = 4
#: Items of a container keyed one by one before the container is keyed by its repr's digest alone.
ITEMS = 10_000


class Unkeyable(ValueError):
    """A value whose effect on scores the suite cannot know; the message names it (the object needs ``model_key``)."""


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _of_library(obj: object, package: str) -> bool:
    return type(obj).__module__.split(".")[0] == package


def weights_key(module: Any) -> str:
    """A torch module's class and a digest of every tensor of its state as loaded (names, dtypes, shapes, bytes)."""
    tensors = [(name, *_tensor_key(tensor)) for name, tensor in sorted(module.state_dict().items())]
    return f"{type(module).__name__}@weights:{compact_json_digest(tensors)[:16]}"


def _tensor_key(tensor: Any) -> tuple[str, list[int], str]:
    """A torch tensor's dtype, shape and the digest of its bytes."""
    import torch  # only for a tensor handed over, whose library is loaded already

    raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    return str(tensor.dtype), list(tensor.shape), bytes_digest(memoryview(raw))


def model_name(model: Any) -> str:
    """A transformers model's name: its hub id, or a local folder's last part."""
    name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)
    return Path(name).name if Path(name).expanduser().is_dir() else name


def _is_module(value: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def value_key(value: object, where: str, depth: int = DEPTH, seen: frozenset[int] = frozenset()) -> object:
    """What ``value`` contributes to a derived key (JSON-able); ``Unkeyable`` naming ``where`` when it cannot tell."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (str, bytes)):
        raw = value if isinstance(value, bytes) else value.encode()
        return repr(value) if len(value) <= 200 else f"sha256:{bytes_digest(raw)}"
    if id(value) in seen or depth < 0:
        return f"{type(value).__qualname__}:(reached again)" if id(value) in seen else _unkeyable(value, where)
    seen = seen | {id(value)}
    if isinstance(value, re.Pattern):
        return f"pattern:{value.pattern!r}:{value.flags}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}@{_version(value.__name__.split('.')[0])}"
    if isinstance(value, np.ndarray):
        return f"array:{value.dtype}:{list(value.shape)}:{bytes_digest(np.ascontiguousarray(value).tobytes())}"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        items = sorted(value.items(), key=repr) if isinstance(value, dict) else \
            sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
        if len(items) > ITEMS:
            return f"{type(value).__name__}:sha256:{text_digest(repr(items))}"
        return [value_key(item, where, depth - 1, seen) for item in items]
    if isinstance(value, (types.FunctionType, types.MethodType)):
        return function_key(value, where, depth - 1, seen)
    if isinstance(value, type) or isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return _code_of(value)
    adapted = _library_scorer(value)
    if adapted is not None:
        return adapted.model_key
    if _is_module(value):
        return weights_key(value)
    if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):
        return list(_tensor_key(value))
    own = getattr(value, "model_key", None)
    if isinstance(own, str) and own.strip():
        return own
    if hasattr(value, "__dict__") and not of_installed_library(value):
        return {"class": _code_of(type(value)),
                "state": value_key(dict(vars(value)), f"{where}.{type(value).__name__}", depth - 1, seen)}
    return _unkeyable(value, where)


#: Where Python's own modules live: their objects, like an installed library's, hold state the suite cannot read.
_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def of_installed_library(value: object) -> bool:
    """Whether ``value`` (an object, or a function or class) is an installed library's or Python's own: its state is
    that library's business, not keyable here; its code is known by the library's version."""
    name = value.__module__ if isinstance(value, (type, types.FunctionType)) else type(value).__module__
    if name in sys.builtin_module_names or name == "builtins":
        return True
    origin = Path(getattr(sys.modules.get(name), "__file__", None) or "")
    return "site-packages" in origin.parts or (origin.is_absolute() and origin.resolve().is_relative_to(_STDLIB))


def _unkeyable(value: object, where: str) -> Any:
    raise Unkeyable(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, whose effect on scores the "
                    "suite cannot read")


def _code_of(obj: Any) -> str:
    """A function's or class's code: its module's code identity when it is a file on ``sys.path`` (a factory's
    rule), else its source (a notebook cell), else a library's name and version."""
    module = getattr(obj, "__module__", None) or ""
    root = module.split(".")[0]
    if of_installed_library(obj):
        return f"{module}:{getattr(obj, '__qualname__', '')}@{_version(root)}"
    identity: object = own_code_identity(module) if module not in ("__main__", "") else None
    if identity is None:
        try:
            identity = inspect.getsource(obj)
        except (OSError, TypeError):
            code = getattr(obj, "__code__", None)
            identity = [code.co_code.hex(), repr(code.co_consts)] if code is not None else None
    if identity is None:
        raise Unkeyable(f"{getattr(obj, '__qualname__', obj)!r} has no source the suite can read")
    return f"{module}:{getattr(obj, '__qualname__', '')}:{compact_json_digest(identity, default=str)[:16]}"


def _names_read(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def function_key(f: Callable[..., Any], where: str, depth: int = DEPTH, seen: frozenset[int] = frozenset()) -> object:
    """A function's code and every value it reads: defaults, closure cells and the globals it names."""
    if isinstance(f, types.MethodType):
        return {"method": function_key(f.__func__, where, depth, seen),
                "self": value_key(f.__self__, f"{where}.__self__", depth - 1, seen)}
    code = f.__code__
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in f.__closure__ or ())))
    read = {name: f.__globals__[name] for name in sorted(_names_read(code)) if name in f.__globals__}
    values = {"defaults": f.__defaults__, "kwdefaults": f.__kwdefaults__, **cells, **read}
    return {"code": _code_of(f),
            "reads": {name: value_key(v, f"{where}: the value {name!r} it reads", depth, seen | {id(f)})
                      for name, v in values.items() if v is not f}}


# ---- adapters ------------------------------------------------------------------------------------


class CrossEncoderScorer(DeclaredKey):
    """A ``sentence_transformers.CrossEncoder`` as it is: ``predict`` on each batch."""

    def __init__(self, model: Any, declared: str | None = None) -> None:
        self.model = model
        settings = {"max_length": model.max_length, "activation": repr(model.activation_fn)}
        #: Taken once, when the object is handed over: its weights are hashed once, and a later change in memory is
        #: another object's business (hand it over again). A ``model_key`` the object carries stands for them.
        self._parts = {"judge": f"sentence-transformers-{_version('sentence-transformers')}",
                       "model": f"declared:{declared}" if declared else f"{model_name(model)}|{weights_key(model)}",
                       "settings": json.dumps(settings, sort_keys=True, separators=(",", ":"))}

    def key_parts(self) -> dict[str, str]:
        return self._parts

    def score(self, inputs: Sequence[tuple[str, str]]) -> np.ndarray:
        out = self.model.predict(list(inputs), show_progress_bar=False, convert_to_numpy=True)
        return one_per_input(out, len(inputs), "CrossEncoder.predict")


class ComputeScoreScorer(DeclaredKey):
    """A FlagEmbedding reranker (``FlagReranker``, ``FlagLLMReranker``, ...), or any object with
    ``compute_score(pairs)``: one call per batch."""

    def __init__(self, model: Any, where: str, declared: str | None = None) -> None:
        self.model = model
        self._key = declared or json.dumps(value_key(model, where), sort_keys=True, separators=(",", ":"))

    def key_parts(self) -> dict[str, str]:
        return {"judge": f"{type(self.model).__module__.split('.')[0]}-compute_score",
                "model": f"{type(self.model).__qualname__}:{text_digest(self._key)[:16]}"}

    def score(self, inputs: Sequence[tuple[str, str]]) -> np.ndarray:
        out = self.model.compute_score([list(pair) for pair in inputs])
        return one_per_input(np.atleast_1d(np.asarray(out)), len(inputs), "compute_score")


class FunctionScorer(DeclaredKey):
    """A plain function ``f(query, passages) -> scores``: one call per query with its distinct passages."""

    def __init__(self, f: Callable[[str, list[str]], Sequence[float]], key: str) -> None:
        self.f = f
        self._key = key

    def key_parts(self) -> dict[str, str]:
        return {"judge": "function", "function": self._key}

    def score(self, inputs: Sequence[tuple[str, str]]) -> np.ndarray:
        scores = np.full(len(inputs), np.nan)
        for query, passages in by_query(inputs).items():
            docs = list(passages)
            out = one_per_input(self.f(query, docs), len(docs), f"{getattr(self.f, '__name__', 'f')}(query, passages)")
            for doc, value in zip(docs, out):
                scores[passages[doc]] = value
        return scores


def one_per_input(out: object, n: int, what: str) -> np.ndarray:
    """Scores as numbers, one per input: a (n, 2) head's log-odds, a (n, 1) column squeezed; text is refused (numeric
    or not: a reply that must be parsed is an LLM judge's business, never guessed here)."""
    scores = np.asarray(out)
    if scores.dtype.kind not in "biuf":
        raise ValueError(f"{what} returned {scores.dtype} values, not numbers (one number per input)")
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    elif scores.ndim == 2 and scores.shape[1] == 2:
        scores = scores[:, 1] - scores[:, 0]
    if scores.shape != (n,):
        raise ValueError(f"{what} returned shape {scores.shape} for {n} inputs (one number per input)")
    return scores.astype(float)


def _library_scorer(obj: object) -> DeclaredKey | None:
    """The adapter of a library's reranker object (None: not one the suite knows), keyed by the ``model_key`` the
    object carries where it has one, else by its model's name and weights."""
    declared = getattr(obj, "model_key", None)
    declared = declared if isinstance(declared, str) and declared.strip() else None
    if _of_library(obj, "sentence_transformers") and callable(getattr(obj, "predict", None)) \
            and hasattr(obj, "activation_fn"):
        return CrossEncoderScorer(obj, declared)
    if _of_library(obj, "rerankers") and callable(getattr(obj, "rank", None)):
        from rankers.scorers.rerankers_scorer import RerankersScorer  # the rerankers kind's reading of a ranker

        model = getattr(obj, "model", None)
        if declared:
            return RerankersScorer.of(obj, "declared", declared)
        if not _is_module(model):  # an API client or FlashRank: nothing the suite can read
            raise Unkeyable(f"a rerankers {type(obj).__name__}, whose model is no torch model the suite can read")
        return RerankersScorer.of(obj, model_name(model), weights_key(model))
    return None


def _takes(call: Callable[..., Any], n: int) -> bool | None:
    """Whether ``call`` takes exactly ``n`` positional arguments without defaults (None: no signature to tell)."""
    try:
        params = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= n <= len(positional) or any(p.kind == p.VAR_POSITIONAL for p in params)


def as_text_scorer(obj: object, label: str) -> Any:
    """``obj`` as a text scorer with a ``model_key`` (itself when it is one), or ``TypeError``/``Unkeyable`` saying
    why not: what it is, what is accepted, and, where its key cannot be derived, that it needs ``model_key``."""
    if isinstance(obj, type):
        raise TypeError(f"{label}: {obj.__qualname__} is a class; hand over an instance of it")
    own = getattr(obj, "model_key", None)
    score = getattr(obj, "score", None)
    try:
        library = _library_scorer(obj) if not (callable(score) and _takes(score, 1) is not False) else None
        if library is not None:
            return library
        if callable(score) and _takes(score, 1) is not False:
            if own is not None:
                return obj
            return _Keyed(obj, value_key(obj, label))
        if callable(getattr(obj, "compute_score", None)):
            return ComputeScoreScorer(obj, label, own if isinstance(own, str) and own.strip() else None)
        if isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)) or (
                callable(obj) and _takes(obj, 2)):
            if _takes(obj, 2) is False:
                raise TypeError(f"{label}: the function {getattr(obj, '__qualname__', obj)!r} must take (query, "
                                "passages)")
            key = own if isinstance(own, str) and own.strip() else \
                json.dumps(function_key(obj, label), sort_keys=True, separators=(",", ":"))
            return FunctionScorer(obj, key)
    except Unkeyable as exc:
        raise Unkeyable(f"{exc}; give it a model_key naming the model and every setting that changes a score "
                        "(obj.model_key = 'my-model-v1'; a function takes the attribute too)") from None
    raise TypeError(f"{label}: a {type(obj).__module__}.{type(obj).__qualname__} is none of what is accepted: "
                    f"{ACCEPTED}")


class _Keyed:
    """An object with ``score(inputs)`` and no ``model_key`` of its own, keyed by its code and state."""

    def __init__(self, inner: Any, key: object) -> None:
        self.inner = inner
        self.model_key = f"derived:{compact_json_digest(key, default=str)[:16]}"

    def score(self, inputs: Sequence[tuple[str, str]]) -> Any:
        return self.inner.score(inputs)
