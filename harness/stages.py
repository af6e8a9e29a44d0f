"""Stage timings of a session: each computed stage timed on its own, announced while it runs long.

Records stay in memory and travel to the report with the rows of the spec that triggered them
(``conftest.py``); nothing here writes a file.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fixtures import progress

#: A stage still running after this many seconds says so, and says when it ends.
ANNOUNCE_AFTER_S = 3.0


class StageClock:
    """Times stages; a stage that triggered another is timed without it (``seconds``) and with it."""

    def __init__(self) -> None:
        self._stages: list[dict[str, Any]] = []
        self._open: list[float] = []  # seconds of nested stages, per open stage

    @contextmanager
    def stage(self, split: str, name: str, **info: Any) -> Iterator[dict[str, Any]]:
        """Time a stage; its record joins the run manifest through the report (never written from here)."""
        record: dict[str, Any] = {"split": split, "stage": name, **info}
        started = time.perf_counter()
        self._open.append(0.0)
        try:
            with progress.stage(f"{name} ({split})", announce_after_s=ANNOUNCE_AFTER_S):
                yield record
        finally:
            seconds = time.perf_counter() - started
            nested = self._open.pop()
            if self._open:
                self._open[-1] += seconds
            # A stage that triggered another (a window ranking that first had to train its scorer) is timed on
            # its own: ``seconds`` excludes the nested stages, ``with_nested_s`` includes them.
            record["seconds"] = round(seconds - nested, 3)
            record["with_nested_s"] = round(seconds, 3)
            self._stages.append(record)

    def drain(self) -> list[dict[str, Any]]:
        """The records of the stages finished since the last call (each is reported once)."""
        out, self._stages = self._stages, []
        return out
