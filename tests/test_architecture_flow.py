"""The one flow docs/architecture.md draws, measured by a tracer: how many calls a Table II row crosses from the
reference ranker's ``rank`` to the CSV write, through the engine ``evaluate()`` and pytest share.

The tracer (``sys.setprofile``) keeps the call stack at two moments of a real run: when the fusion kind's ``rank``
is called (counted up to the part that computes the row, ``harness.parts.table2_row``) and when pandas writes
``table2.csv`` (counted up to the one writer, ``reports.writer.publish_run``). The record sits between them: the
part adds the row (``RecordBuilder.add``) and the engine hands its ``RunRecord`` to the writer. The document states
the count; this test fails when the code and the document disagree.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from fixtures.settings import PROJECT_ROOT, Settings
from harness.profile import load_profile
from harness.run import RunBuilder, publish
from harness.session import Evaluation

DOC = PROJECT_ROOT / "docs" / "architecture.md"


def _stack_until(frame, stop: Callable[[object], bool]) -> list[str]:
    """Qualified names from ``frame`` up to the first frame ``stop`` accepts (both included), innermost first."""
    names = []
    while frame is not None:
        names.append(f"{frame.f_globals.get('__name__')}.{frame.f_code.co_qualname}")
        if stop(frame):
            return names
        frame = frame.f_back
    raise AssertionError(f"no frame up the stack matched: {names}")


def test_a_table2_row_crosses_the_hops_the_architecture_map_states(tmp_path: Path) -> None:
    settings = Settings(splits=("test",), subset_pairs=24, cache_dir=tmp_path / "cache",
                        results_dir=tmp_path / "results")
    run = RunBuilder(Evaluation(settings, load_profile("embedded")), selected=lambda decl: decl.name == "fusion")
    seen: dict[str, list[str]] = {}

    def tracer(frame, event, arg) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "rank" and frame.f_globals.get("__name__") == "rankers.kinds.fusion":
            seen.setdefault("rank", _stack_until(frame, lambda f: f.f_code.co_name == "table2_row"))
        elif code.co_name == "to_csv" and str(frame.f_locals.get("path_or_buf", "")).endswith("table2.csv"):
            seen.setdefault("write", _stack_until(frame, lambda f: f.f_code.co_name == "publish_run"))

    sys.setprofile(tracer)
    try:
        run.run({run.key("table2_row", "test", "fusion")})  # first, so that its part is what ranks (not the manifest)
        record = run.run({run.key("manifest", "test"), run.key("table1", "test", "test")})
        publish(record, tmp_path / "results")
    finally:
        sys.setprofile(None)
    to_rank, to_write = seen["rank"], seen["write"]
    assert to_rank[0].endswith("Fusion.rank") and to_rank[-1] == "harness.parts.table2_row", to_rank
    assert to_write[-1] == "reports.writer.publish_run", to_write
    # calls from the part down to rank, the part's add and the engine's hand-over, calls from the writer to to_csv
    hops = (len(to_rank) - 1) + 2 + (len(to_write) - 1)
    stated = re.search(r"ranker to file\*\* \(measured by `tests/test_architecture_flow.py`\): (\d+) hops",
                       DOC.read_text(encoding="utf-8"))
    assert stated is not None, "docs/architecture.md states no measured hop count"
    chain = " ← ".join(reversed(to_rank)) + " → RecordBuilder.add … RunRecord → " + " → ".join(reversed(to_write))
    assert int(stated.group(1)) == hops, f"the document says {stated.group(1)} hops, the tracer counts {hops}: {chain}"
