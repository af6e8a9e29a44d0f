"""Ranker declarations: every ranker the specs range over is one checked record.

A profile (``specs/profiles/*.toml``) declares each ranker once under ``[rankers.<name>]`` with a
``kind`` (looked up in ``rankers.kinds``: its options, checks and needs live there) and that kind's
options. Keys every ranker takes: ``label``, ``order``, ``population`` (all of Q_c, or a named
seeded sample of whole pairs), ``compare_to`` (its baseline: the ranker its Δ and claims are
against, restricted to the same directions), ``marks``. A window reranker also takes ``reference``
(whose top 20 it reorders), ``tie_breaker`` (whose score breaks text-score ties) and ``mode``:
``"window"`` (every passage of the window is judged) or ``"designated"`` (only the two designated
passages of each direction: strict preference, ties and the tie branch follow the window rule
exactly, position measures are not available; see ``docs/protocol.md#designated-mode``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rankers.kinds import kind, kinds
from rankers.kinds.base import ALL, MARKS, MODES, DeclarationError, RankerDecl

__all__ = ["ALL", "DeclarationError", "RankerDecl", "check_declarations", "parse_declaration"]

_NUM = (int, float)
COMMON = {"kind": (str,), "label": (str,), "population": (str,), "order": _NUM, "marks": (list,),
          "compare_to": (str,)}
WINDOW_ONLY = {"reference": (str,), "tie_breaker": (str,), "mode": (str,)}
#: The reference ranker every profile declares: the window's default reference and the default baseline.
FUSION = "fusion"
#: A ranker's name is part of file names (``runs/<name>.trec``, the cache's stashed runs), CSV columns
#: (``<name>__<field>``, hence no ``__``) and claim names: POSIX's portable file-name characters, which every
#: file system and locale encodes the same way (a name in ``€`` or CJK failed to be written under a Latin-1 locale).
NAME_MAX = 64
PORTABLE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}")


def _check_type(where: str, key: str, value: Any, types: tuple[type, ...]) -> None:
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = " or ".join(t.__name__ for t in types)
        raise DeclarationError(f"{where}: key {key!r} must be {names}, got {value!r}")


def parse_declaration(name: str, table: Mapping[str, Any], where: str) -> RankerDecl:
    """One ``[rankers.<name>]`` table as a checked record; ``where`` names the file and table in errors."""
    if not PORTABLE_NAME.fullmatch(name) or "__" in name:
        raise DeclarationError(f"{where}: ranker name {name!r} must be a portable identifier: 1 to {NAME_MAX} of "
                               "the characters A-Z a-z 0-9 . _ - (a letter or digit first, no '__'); its label may "
                               "hold any text")
    if not isinstance(table, Mapping):
        raise DeclarationError(f"{where}: must be a table of options, got {table!r}")
    ranker_kind = kind(table.get("kind"))
    if ranker_kind is None:
        raise DeclarationError(f"{where}: unknown kind {table.get('kind')!r}; expected one of {sorted(kinds())}")
    options = {k: v for k, v in table.items() if k in ranker_kind.options}
    window = ranker_kind.is_window(options)
    allowed = {**COMMON, **(WINDOW_ONLY if ranker_kind.window else {}), **ranker_kind.options}
    for key, value in table.items():
        if key not in allowed:
            raise DeclarationError(f"{where}: unknown key {key!r} for kind {ranker_kind.name!r}; "
                                   f"allowed: {sorted(allowed)}")
        _check_type(where, key, value, allowed[key])
    for key in ranker_kind.required:
        if key not in table or table[key] in ("", None):
            raise DeclarationError(f"{where}: kind {ranker_kind.name!r} needs {key!r}")
    marks = tuple(table.get("marks", ()))
    unknown = [m for m in marks if m not in MARKS]
    if unknown:
        raise DeclarationError(f"{where}: unknown marks {unknown}; allowed: {list(MARKS)}")
    mode = table.get("mode", "window")
    if mode not in MODES:
        raise DeclarationError(f"{where}: mode must be one of {list(MODES)}, got {mode!r}")
    if not window and (mode != "window" or table.get("reference") or table.get("tie_breaker")):
        raise DeclarationError(f"{where}: reference, tie_breaker and mode apply to window rankers only")
    ranker_kind.check(options, where)
    return RankerDecl(name=name, kind=ranker_kind.name, ranker_kind=ranker_kind, options=options,
                      label=str(table.get("label", "")),
                      population=str(table.get("population", ALL)), order=float(table.get("order", 1000.0)),
                      marks=marks, baseline=table.get("compare_to", FUSION),
                      reference=(table.get("reference") or FUSION) if window else None,
                      tie_breaker=table.get("tie_breaker"), mode=mode)


def check_declarations(rankers: Mapping[str, RankerDecl], samples: Mapping[str, object], where: str) -> None:
    """The reference ranker is declared; referenced rankers exist and are full-pool rankers over all of Q_c;
    samples exist."""
    if FUSION not in rankers:
        raise DeclarationError(f"{where} [rankers]: a profile must declare the reference ranker {FUSION!r} "
                               f"(kind = {FUSION!r})")
    for decl in rankers.values():
        at = f"{where} [rankers.{decl.name}]"
        if decl.population != ALL and decl.population not in samples:
            raise DeclarationError(f"{at}: population {decl.population!r} is neither 'all' nor a declared "
                                   f"[samples.<name>] (declared: {sorted(samples)})")
        for role, key in (("reference", "reference"), ("tie_breaker", "tie_breaker"), ("baseline", "compare_to")):
            other = getattr(decl, role)
            if other is None or (role == "baseline" and other == decl.name):
                continue
            if other not in rankers:
                raise DeclarationError(f"{at}: {key} {other!r} is not a declared ranker ({sorted(rankers)})")
            target = rankers[other]
            if role != "baseline" and (target.is_window or target.population != ALL):
                raise DeclarationError(f"{at}: {key} {other!r} must be a full-pool ranker over all of Q_c")
            if role == "baseline" and target.population not in (ALL, decl.population):
                raise DeclarationError(f"{at}: compare_to {other!r} is evaluated on {target.population!r}, "
                                       f"which does not contain this ranker's population {decl.population!r}")
    if FUSION in rankers and rankers[FUSION].kind != FUSION:
        raise DeclarationError(f"{where} [rankers.{FUSION}]: the name {FUSION!r} is reserved for the kind {FUSION!r}")
