"""Ranker declarations: every ranker the specs range over is one declared record (issue "Rankers as declared").

A profile (``specs/profiles/*.toml``) declares each ranker once under ``[rankers.<name>]``
with a ``kind`` and that kind's options. The record says what the ranker is (kind,
options), which directions it is evaluated on (``population``: all of Q_c, or a named
seeded sample of whole pairs), what it is compared with (``compare_to``, restricted to the
same directions), and, for a window reranker, whose top 20 it reorders (``reference``)
and whose score breaks text-score ties (``tie_breaker``). The session builds any
declaration; the tables, claims, benchmarks and the report order read the records. Adding
a ranker of an existing kind is one profile entry.

Kinds (``KINDS``):

- full pool: ``fusion``; ``lambdamart`` (``background = 0`` is E0, ``8`` is N=8);
  ``trec_run`` (another system's run evaluated in the fixed pool); ``python`` with
  ``window = false`` (a full-pool scorer factory);
- window (a pointwise text scorer over the reference's top 20): ``cross_encoder``,
  ``rerank_api``, ``llm_grader``, ``rerankers``, ``python`` (``window = true``).

A window ranker runs in ``mode = "window"`` (every passage of the window is scored) or
``mode = "designated"`` (only the two designated passages of each direction are scored:
strict preference, ties and the tie branch follow the window rule exactly, position
measures are not available). Designated mode lets an expensive scorer decide preference on
a much larger sample for the same cost.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Markers a declaration may carry: pytest marks that select or skip its specs.
MARKS = ("llm", "gpu", "slow")
MODES = ("window", "designated")
ALL = "all"


class DeclarationError(ValueError):
    """A ranker declaration is malformed; the message names where (file and table) and the key."""


@dataclass(frozen=True)
class Kind:
    """What a kind is and which options it takes (name -> accepted Python types)."""

    name: str
    window: bool | None  # None: decided by the declaration's ``window`` option (python)
    options: Mapping[str, tuple[type, ...]]
    required: tuple[str, ...] = ()
    max_score: float | None = None  # a bounded integer scale (the grader's 0-4): double-max counts apply
    doc: str = ""


_NUM = (int, float)
_GEN = {"max_tokens": (int,), "thinking": (bool,), "temperature": _NUM, "seed": (int,), "concurrency": (int,),
        "timeout_s": _NUM, "logprobs": (int,)}
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("fusion", False, {"weights": (dict,), "thresholds": (dict,)},
         doc="fixed fusion of the three routes (SPEC §2); weights/thresholds override the SPEC's per route"),
    Kind("lambdamart", False, {"background": (int,)}, ("background",),
         doc="LightGBM lambdarank over the 38 pool features; background 0 = E0, 8 = N=8"),
    Kind("trec_run", False, {"path": (str,)}, ("path",),
         doc="a TREC run file of another system, evaluated in the fixed pool"),
    Kind("python", None, {"factory": (str,), "window": (bool,), "options": (dict,)}, ("factory",),
         doc="package.module:factory returning a text scorer (window = true) or a full-pool scorer"),
    Kind("cross_encoder", True, {"model": (str,), "dtype": (str,), "device": (str,), "batch_size": (int,),
                                 "max_length": (int,), "int8": (bool,), "revision": (str,)}, ("model",),
         doc="a transformers sequence-classification model (hub name or local folder); 'trained' = fine-tuned here"),
    Kind("rerank_api", True, {"url": (str,), "model": (str,), "api": (str,), "concurrency": (int,),
                              "timeout_s": _NUM, "batch_size": (int,), "revision": (str,)}, ("url", "model"),
         doc="an HTTP /rerank endpoint (vLLM, SGLang, llama.cpp server, TEI, Infinity)"),
    Kind("llm_grader", True, {"backend": (str,), "model": (str,), "url": (str,), "grade": (str,), "prompt": (str,),
                              "passage_tokens": (int,), "query_tokens": (int,), "near_tie_margin": _NUM,
                              "n_threads": (int,), "max_model_len": (int,), **_GEN},
         ("backend", "model"), max_score=4.0,
         doc="an LLM asked for an integer grade 0-4 (llamacpp, vllm or any OpenAI-compatible server)"),
    Kind("rerankers", True, {"model": (str,), "model_type": (str,), "batch_size": (int,), "options": (dict,)},
         ("model",), doc="any model of the rerankers library"),
)}
COMMON = {"kind": (str,), "label": (str,), "population": (str,), "order": _NUM, "marks": (list,),
          "compare_to": (str,)}
WINDOW_ONLY = {"reference": (str,), "tie_breaker": (str,), "mode": (str,)}


@dataclass(frozen=True)
class RankerDecl:
    """One declared ranker. ``options`` are the kind's own settings, exactly as declared."""

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    population: str = ALL
    order: float = 1000.0
    marks: tuple[str, ...] = ()
    compare_to: str | None = "fusion"
    reference: str | None = None
    tie_breaker: str | None = None
    mode: str = "window"

    @property
    def is_window(self) -> bool:
        spec = KINDS[self.kind]
        return bool(self.options.get("window", True)) if spec.window is None else spec.window

    @property
    def scorer_options(self) -> dict[str, Any]:
        """The options that build the text scorer: all but ``grade``, which only says how a judgment is read."""
        return {k: v for k, v in self.options.items() if k != "grade"}

    @property
    def designated_only(self) -> bool:
        return self.is_window and self.mode == "designated"

    @property
    def max_score(self) -> float | None:
        return KINDS[self.kind].max_score

    @property
    def sampled(self) -> bool:
        return self.population != ALL

    def describe(self) -> str:
        return self.label or self.name


def _check_type(where: str, key: str, value: Any, types: tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        names = " or ".join(t.__name__ for t in types)
        raise DeclarationError(f"{where}: key {key!r} must be {names}, got {value!r}")


def parse_declaration(name: str, table: Mapping[str, Any], where: str) -> RankerDecl:
    """One ``[rankers.<name>]`` table as a checked record; ``where`` names the file and table in errors."""
    if not name or "__" in name or any(ch.isspace() for ch in name) or "/" in name:
        raise DeclarationError(f"{where}: ranker name {name!r} must be non-empty, without whitespace, '/' or '__'")
    if not isinstance(table, Mapping):
        raise DeclarationError(f"{where}: must be a table of options, got {table!r}")
    kind = table.get("kind")
    if kind not in KINDS:
        raise DeclarationError(f"{where}: unknown kind {kind!r}; expected one of {sorted(KINDS)}")
    spec = KINDS[kind]
    window_keys = WINDOW_ONLY if spec.window is not False else {}
    allowed = {**COMMON, **window_keys, **spec.options}
    for key, value in table.items():
        if key not in allowed:
            raise DeclarationError(f"{where}: unknown key {key!r} for kind {kind!r}; allowed: {sorted(allowed)}")
        _check_type(where, key, value, allowed[key])
    for key in spec.required:
        if key not in table or table[key] in ("", None):
            raise DeclarationError(f"{where}: kind {kind!r} needs {key!r}")
    marks = tuple(table.get("marks", ()))
    unknown = [m for m in marks if m not in MARKS]
    if unknown:
        raise DeclarationError(f"{where}: unknown marks {unknown}; allowed: {list(MARKS)}")
    mode = table.get("mode", "window")
    if mode not in MODES:
        raise DeclarationError(f"{where}: mode must be one of {list(MODES)}, got {mode!r}")
    options = {k: v for k, v in table.items() if k in spec.options}
    if kind == "lambdamart" and options["background"] < 0:
        raise DeclarationError(f"{where}: background must be >= 0, got {options['background']}")
    if kind == "llm_grader" and options.get("grade", "argmax") not in ("argmax", "expected"):
        raise DeclarationError(f"{where}: grade must be 'argmax' or 'expected', got {options['grade']!r}")
    decl = RankerDecl(name=name, kind=kind, options=options, label=str(table.get("label", "")),
                      population=str(table.get("population", ALL)), order=float(table.get("order", 1000.0)),
                      marks=marks, compare_to=table.get("compare_to", "fusion"),
                      reference=table.get("reference"), tie_breaker=table.get("tie_breaker"), mode=mode)
    if decl.is_window:
        decl = RankerDecl(**{**decl.__dict__, "reference": decl.reference or "fusion"})
    elif mode != "window" or table.get("reference") or table.get("tie_breaker"):
        raise DeclarationError(f"{where}: reference, tie_breaker and mode apply to window rankers only")
    return decl


def check_registry(rankers: Mapping[str, RankerDecl], samples: Mapping[str, object], where: str) -> None:
    """Cross-references: referenced rankers exist and are full-pool single-score rankers, samples exist, no cycles."""
    for decl in rankers.values():
        at = f"{where} [rankers.{decl.name}]"
        if decl.population != ALL and decl.population not in samples:
            raise DeclarationError(f"{at}: population {decl.population!r} is neither 'all' nor a declared "
                                   f"[samples.<name>] (declared: {sorted(samples)})")
        for key in ("reference", "tie_breaker", "compare_to"):
            other = getattr(decl, key)
            if other is None or (key == "compare_to" and other == decl.name):
                continue
            if other not in rankers:
                raise DeclarationError(f"{at}: {key} {other!r} is not a declared ranker ({sorted(rankers)})")
            target = rankers[other]
            if key != "compare_to" and (target.is_window or target.population != ALL):
                raise DeclarationError(f"{at}: {key} {other!r} must be a full-pool ranker over all of Q_c")
            if key == "compare_to" and target.population not in (ALL, decl.population):
                raise DeclarationError(f"{at}: compare_to {other!r} is evaluated on {target.population!r}, "
                                       f"which does not contain this ranker's population {decl.population!r}")
    if "fusion" in rankers and rankers["fusion"].kind != "fusion":
        raise DeclarationError(f"{where} [rankers.fusion]: the name 'fusion' is reserved for the kind 'fusion'")
