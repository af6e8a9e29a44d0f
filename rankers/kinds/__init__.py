"""The ranker kinds, looked up by name: each kind module of this package defines one kind (or a family).

What the kinds share registers none: what a kind is and the registry (``base``), the pointwise window kind
(``pointwise``), the LLM kinds' backend options (``llm``), requirements and judging plans.

Adding a kind is adding a module here that subclasses ``PoolKind`` or a ``WindowKind`` and calls
``register``; the profile checks, the session, every spec, table, claim and benchmark pick it up
by name. Modules are found, not listed: a kind module is imported on the first lookup (each
imports its heavy libraries only inside the functions that need them).
"""
from __future__ import annotations

import importlib
import pkgutil

from rankers.kinds.base import RankerKind, registered

_loaded = False


def _load() -> None:
    """Import every kind module of this package once (each registers its kinds)."""
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            if module.name != "base":
                importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True


def kinds() -> dict[str, RankerKind]:
    """Every known kind by name."""
    _load()
    return {k.name: k for k in registered()}


def kind(name: object) -> RankerKind | None:
    """The kind of that name, or None."""
    return kinds().get(name) if isinstance(name, str) else None
