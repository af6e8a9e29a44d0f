"""A ranker kind defined by a test, registered for the test only."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from rankers.kinds import base

K = TypeVar("K", bound=base.RankerKind)


@contextmanager
def registered(kind: K) -> Iterator[K]:
    """``kind`` known by its name inside the block, forgotten afterwards (other tests never see it)."""
    base.register(kind)
    try:
        yield kind
    finally:
        base._registry.pop(kind.name, None)
