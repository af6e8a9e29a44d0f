"""Publishing a run's results: the single step that writes ``results/<split>/``, for every split at once.

A run is published as one transaction (docs/protocol.md#publishing). Every split is written
into ``<root>/.runs/<run id>/<split>/`` first; then one atomic rename repoints the
``<root>/.current`` symlink at that folder, and ``<root>/<split>`` are symlinks to
``.current/<split>``. So whatever stops the process (an exception, SIGINT, SIGTERM, SIGKILL,
a full disk), every split under ``<root>`` comes from one complete run: the previous one,
or this one. A SIGINT or SIGTERM while staging is deferred to the next checkpoint, which
abandons the staged run. Published files are independent copies, checked against the seals
of the cached artifacts they come from, and ``manifest.json`` lists the sha256 of every other
published file. Files: CSV + JSON per table, ``table2.tex``, ``report.md``, figures with
their data, ``manifest.json``, and the contract files other tools read: ``qrels.txt``,
``runs/<ranker>.trec``, ``pool.parquet``, ``directions.csv`` (docs/protocol.md#outputs).
Each split comes from one ``reports.record.SplitRecord``; its text comes from
``reports.render`` and ``reports.report_md``.
"""
from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from filelock import Timeout

from fixtures.identity import folder_digests
from rankers.trec import write_qrels
from reports.explore import write_explore
from reports.figures import write_figures
from reports.ledger import kept_line
from reports.record import Declared, NotEvaluated, Publication, SessionEnd, SplitRecord
from reports.run_record import RunRecord
from reports.render import table2_latex
from reports.report_md import report_markdown
from reports.transaction import LEGACY_MARKER, PARTIAL, StagedRun, claim, current_run, results_problem

#: pytest's exit code of an interrupted session (Ctrl-C): nothing is published then.
INTERRUPTED = 2


class PublishError(RuntimeError):
    """The run could not be published; every split keeps the previous complete results."""


class PublishInterrupted(PublishError):
    """SIGINT or SIGTERM arrived before the swap: the staged run was abandoned."""


def with_labels(table2: pd.DataFrame, declared: Mapping[str, Declared],
                seeds: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Table II with each ranker's declared ``label`` (its name when none is declared), the ``compare_to`` baseline
    its Δ is against (blank where it has no Δ) and, for a ranker trained with several seeds, which seed its row is
    (``seeds``: ``seed 13``, in the words every output uses) as the last columns, after the contract and intervals."""
    out = table2.copy()
    names = out["ranker"].astype(str)
    out["label"] = [declared[r].label if r in declared else r for r in names]
    if "compare_to" not in out.columns:
        delta = out["delta_pts"] if "delta_pts" in out.columns else pd.Series(float("nan"), index=out.index)
        out["compare_to"] = [str((declared[r].compare_to if r in declared else None) or "") if pd.notna(d) else ""
                             for r, d in zip(names, delta)]
    if "seeds" not in out.columns:
        out["seeds"] = [(seeds or {}).get(r, "") for r in names]
    return out


def _write(out: Path, record: SplitRecord, publication: Publication, figure_cache: Path | None) -> None:
    manifest = record.manifest(publication)
    tables = dict(record.tables)
    if "table2" in tables:  # every table, figure and page below names a ranker with its declared label
        tables["table2"] = with_labels(tables["table2"], record.declared, record.seed_of_rows)
    for name, frame in tables.items():
        frame.to_csv(out / f"{name}.csv", index=False)
        frame.to_json(out / f"{name}.json", orient="records", indent=1)
    if "table2" in tables:
        (out / "table2.tex").write_text(table2_latex(tables["table2"], record.split, record.profile_name or "?",
                                                     str(record.entries.get("code_commit", "?"))), encoding="utf-8")
    population = record.artifact("population")
    if population is not None:
        write_qrels(record.frame(population), out / "qrels.txt")
        record.directions.to_csv(out / "directions.csv", index=False)
    judgments = [record.frame(a) for a in record.of_kind("judgments")]
    if judgments:  # every text scorer's judgments, one row per (ranker, scope, qid, pid)
        pd.concat(judgments, ignore_index=True).to_csv(out / "judgments.csv", index=False)
    pool = record.artifact("pool")
    if pool is not None:
        pool.copy_to(out / "pool.parquet")
    for run in record.of_kind("run"):
        run.copy_to(out / "runs" / f"{run.ranker}.trec")
    figures = write_figures(out, tables, figure_cache)
    if population is not None and "table2" in tables:
        manifest["explore"] = write_explore(out, record, tables, publication.run_id, figures, figure_cache)
    labels = {r: record.label(r) for r in [*record.declared, *record.rankers]}  # Table II's label column's values
    (out / "report.md").write_text(report_markdown(record, tables, labels, figures, publication), encoding="utf-8")
    manifest["files"] = folder_digests(out, skip=lambda p: p.name == "manifest.json")  # all but the manifest
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str), encoding="utf-8")


@contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM are recorded instead of acted on while publishing; the list says which arrived.

    Publishing checks the list between steps (``publish``'s ``interrupts``) and abandons a
    staged run cleanly, so an interrupt never leaves a traceback or a half-swapped results folder.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def publish(root: Path, run_id: str, records: Mapping[str, SplitRecord], *, exitstatus: int = 0,
            figure_cache: Path | None = None, not_evaluated: Mapping[str, Sequence[NotEvaluated]] | None = None,
            partial: Sequence[str] = (), interrupts: Sequence[int] = (), kept: list[str] | None = None
            ) -> dict[str, Path]:
    """Stage every split of a run under ``<root>/.runs/<run_id>`` and swap them in together.

    ``not_evaluated`` lists each split's tests that did not run to a result, ``partial`` why the run is partial
    (the same for every split). Returns ``<root>/<split>`` per split. A ``root`` the suite did not make is refused
    before anything is written (``reports.transaction.claim``, docs/outputs.md#whose-folder). ``interrupts`` (the
    signals ``deferred_signals`` records) is looked at between steps: once one has arrived, the staged run is abandoned
    (``PublishInterrupted``) and ``root`` is left as it was. What the run's clean-ups kept because the suite did not
    write it, not named before, is appended to ``kept`` (paths relative to ``root``; ``reports.ledger``).
    """
    root = Path(root)
    if exitstatus == INTERRUPTED:
        raise PublishError(f"the run was interrupted; {root} keeps the previous complete results")
    try:
        claim(root, records, LEGACY_MARKER)
        run = StagedRun(root, run_id, LEGACY_MARKER, names=records)
    except (OSError, Timeout) as exc:
        raise PublishError(f"cannot publish into {root} ({type(exc).__name__}: {exc}); "
                           "the previous results are left as they were") from exc

    def checkpoint() -> None:
        if interrupts:
            raise PublishInterrupted(f"interrupted while publishing; {root} keeps the previous complete results "
                                     f"(run {current_run(root)})")

    try:
        for split, record in records.items():
            checkpoint()
            out = run.folder / split
            out.mkdir()
            _write(out, record, Publication(run_id, exitstatus, tuple(partial),
                                            tuple((not_evaluated or {}).get(split, ()))), figure_cache)
        checkpoint()
        run.commit(records)
    except PublishError:
        raise
    except Exception as exc:  # anything before the commit leaves the previous run published
        raise PublishError(f"publishing into {root} failed ({type(exc).__name__}: {exc}); "
                           f"{root} keeps the previous complete results (run {current_run(root)})") from exc
    finally:
        run.close()
        if kept is not None:
            kept += run.kept
    return {split: root / split for split in records}


def publish_run(run: RunRecord, results_dir: Path, *, exitstatus: int = 0, compare_run: str | None = None,
                figure_cache: Path | None = None, interrupts: Sequence[int] = (),
                end: SessionEnd | None = None) -> SessionEnd:
    """Publish a whole run: compare it with a saved run (``compare_run``), write every split in one transaction
    (a partial run under ``<results_dir>/partial``) and keep it in the history; what happened is in the returned
    ``SessionEnd`` (a failure to publish too: the previous results stand)."""
    from reports.history import run_id, save_to_history  # pandas I/O only when publishing

    end = end if end is not None else SessionEnd()
    results_dir = Path(results_dir)
    if exitstatus == INTERRUPTED:
        end.notices.append(f"the run was interrupted: nothing published; {results_dir} keeps the previous "
                           "complete results")
        return end
    records = {split: r for split, r in run.splits.items() if "table2" in r.tables}
    for split in sorted(set(run.splits) - set(records)):  # benchmarks only, or no ranker selected
        end.notices.append(f"{split}: no Table II row in this run (benchmarks or a partial selection); "
                           f"nothing of it is published")
    if not records:
        return end
    end.partial = list(run.partial)
    root = results_dir / PARTIAL if end.partial else results_dir
    problem = results_problem(results_dir, records)
    if problem is not None:  # the history and the partial root go inside it: it must be the suite's too
        end.failed.append(f"cannot publish into {results_dir}: {problem}; nothing was written")
        return end
    ident = run_id(list(records.values()), partial=bool(end.partial))
    if compare_run:  # before publishing: the saved run may be the very folder about to be replaced
        records = {split: _compared(record, results_dir, compare_run, end) for split, record in records.items()}
    kept: list[str] = []  # what publishing keeps because the suite did not write it, relative to results_dir
    try:
        claim(results_dir, ())  # the history goes beside the splits (and a partial run's root inside)
        end.published = publish(root, ident, records, exitstatus=exitstatus, figure_cache=figure_cache,
                                not_evaluated=run.not_evaluated, partial=end.partial, interrupts=interrupts,
                                kept=kept)
        kept = [f"{PARTIAL}/{k}" for k in kept] if root != results_dir else kept
    except PublishError as exc:
        end.failed.append(str(exc))
    except OSError as exc:  # results_dir cannot be made or marked: nothing was written
        end.failed.append(f"cannot publish into {results_dir} ({type(exc).__name__}: {exc}); nothing was written")
    if end.published:  # a partial run too, marked (docs/protocol.md#publishing)
        try:
            saved = save_to_history(results_dir, ident, records, end.published)
            end.healed, end.saved = saved.healed, ident
            kept += saved.kept
        except Exception as exc:  # noqa: BLE001 - the published run stands; the error is reported
            end.errors.append(f"published, but not saved to the history ({type(exc).__name__}: {exc})")
    end.kept = kept_line(results_dir, kept) if kept else None
    return end


def _compared(record: SplitRecord, results_dir: Path, other: str, end: SessionEnd) -> SplitRecord:
    """The record with its ``comparison`` table against the saved run ``other``; unchanged (and the error
    reported, the run still published) when the comparison cannot be made."""
    from reports.run_comparison import comparison_table  # pandas I/O only when comparing

    try:
        comparison = comparison_table(results_dir, other, record)
    except Exception as exc:  # noqa: BLE001 - the run is still published; the error is reported
        end.errors.append(f"{record.split}: no comparison with {other} ({type(exc).__name__}: {exc})")
        return record
    end.comparison[record.split] = comparison
    return record.with_table("comparison", comparison)
