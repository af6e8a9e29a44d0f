"""The frozen pools out, in standard forms: ``python -m harness.export --out DIR`` (run from the checkout).

An outside system (PyTerrier, rank_llm, the ``rerankers`` library, a script) reranks exactly the
suite's candidates from these files and hands its run back through a profile's ``kind = "trec_run"``
ranker (``docs/protocol.md#trec-runs``). The command takes the suite's own options (``--profile``,
``--splits``, ``--subset-pairs``, ``--cache-dir``, ``--data-dir``...), so it exports the very pools a
run with those options evaluates; a missing pool is built first. Per split, under ``<out>/<split>/``:

- ``queries.tsv`` (``qid<TAB>text``) and ``queries.jsonl`` (``{"qid", "_id", "text"}``): every pool query;
- ``corpus.jsonl`` (``{"docno", "_id", "text"}``) and ``corpus.tsv`` (``docno<TAB>text``): the corpus
  the split ranks (Test queries rank the Test passages; the others rank Train+Validation);
- ``qrels.txt`` (TREC: ``qid 0 pid relevance``): one line per eligible direction, its preferred
  passage 1; ``directions.tsv``: every direction with its pair, group, designated passages and
  whether it is eligible (counted in the suite's tables);
- ``candidates.trec``: the whole pool per query in fusion order (fusion's own score; equal scores are ties, in
  passage id order along the rank column: docs/protocol.md#trec-runs), the candidates to rerank; ``runs/<route>.trec``: each route's own results (its raw score and rank);
- ``rank_llm.jsonl``: rank_llm's retrieve-results requests (``{"query": {"text", "qid"}, "candidates":
  [{"docid", "score", "doc": {"contents"}}]}``), the top ``--rank-llm-depth`` candidates per query;
- ``manifest.json``: the contract (qid and passage-id formats, corpora), the pool snapshot and its
  digest, counts, settings and the sha256 of every file.

An export is one transaction, like publishing (``reports.transaction``): the splits are staged and
swapped in together, so a killed or interrupted export leaves the previous export whole, never a folder
mixing two exports; ``out/<split>`` are symlinks into ``out/.runs/``.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.identity import folder_digests
from fixtures.routes import ROUTES
from fixtures.settings import pin_cpu_kernels
from fixtures.study import CORPUS_OF
from harness.options import OptionError, argument_parser, fit_to_data, path_option, read_profile, \
    resolve_before_work, settings_from
from harness.session import Evaluation
from rankers.base import Ranking
from rankers.declarations import FUSION
from rankers.window import WINDOW_K
from rankers.trec import write_qrels, write_run
from reports.ledger import kept_line
from reports.transaction import StagedRun, claim, claim_problem, current_run, unique_run_id

#: The qid, passage-id and corpus rules an outside run must follow (also in ``manifest.json``).
CONTRACT = {
    "qid": "<pair id>_q1 (query q1: doc1 preferred over doc2) and <pair id>_q2 (query q2: doc2 "
           "preferred over doc1)",
    "pid": "a corpus file's docno (a declared pair set's); otherwise 'p' + the first 16 hex digits of sha256 of the "
           "passage's exact UTF-8 text (NevIR, inline passages; one text, one id)",
    "corpus": {split: ("Test passages" if corpus == "test" else "Train+Validation passages")
               for split, corpus in CORPUS_OF.items()},
    "candidates": "candidates.trec: every pool passage of every pool query, in fusion order; a run read back with "
                  "kind = 'trec_run' places the pool passages it ranks first, by its score, then those it does not "
                  "rank in fusion order, all tied with each other; passages outside the pool are dropped",
    "read_back": "a profile ranker: kind = \"trec_run\", path = \"<your runs>/{split}.trec\" (relative to the "
                 "profile file); every qid must be a direction of the split it is read for",
}
#: What the TSV files cannot carry inside a field.
TSV_BREAKERS = ("\t", "\n", "\r")


def _tsv(path: Path, rows: Sequence[tuple[str, str]], what: str) -> None:
    """``id<TAB>text`` lines, refusing a text a TSV reader would split (the JSONL keeps every text exactly)."""
    for ident, text in rows:
        if any(ch in text for ch in TSV_BREAKERS):
            raise ValueError(f"{what} {ident!r} contains a tab or line break; TSV cannot hold it (use the JSONL)")
    path.write_text("".join(f"{ident}\t{text}\n" for ident, text in rows), encoding="utf-8")


def _jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def route_runs(pool: pd.DataFrame) -> dict[str, Ranking]:
    """Each route's own results in the pool (raw score, route rank) as a ranking to write as a TREC run."""
    out: dict[str, Ranking] = {}
    for route in ROUTES:
        hits = pool[pool[f"{route}_rank"].notna()].sort_values(["qid", f"{route}_rank"], kind="mergesort")
        frame = pd.DataFrame({"qid": hits["qid"], "pid": hits["pid"], "rank": hits[f"{route}_rank"].astype(int),
                              "k0": hits[f"{route}_score"].astype(float), "k1": 0.0, "k2": 0.0})
        out[route] = Ranking(route, frame.reset_index(drop=True))
    return out


def export_split(ev: Evaluation, split: str, out: Path, rank_llm_depth: int = WINDOW_K) -> dict[str, Any]:
    """Write one split's files into ``out`` (an empty folder); returns its manifest."""
    pool = ev.pool(split)
    fusion = ev.ranking(split, FUSION)
    queries = ev.queries(split)
    corpus = ev.study.corpus_for(split)
    population = ev.population(split)
    pool_qids = list(pd.unique(fusion.frame.sort_values(["qid", "rank"], kind="mergesort")["qid"]))
    ordered = fusion.frame.sort_values(["qid", "rank"], kind="mergesort")
    sizes = ordered.groupby("qid", sort=False)["pid"].transform("size")

    _tsv(out / "queries.tsv", [(q, queries[q]) for q in pool_qids], "query")
    _jsonl(out / "queries.jsonl", [{"qid": q, "_id": q, "text": queries[q]} for q in pool_qids])
    _tsv(out / "corpus.tsv", list(corpus.items()), "passage")
    _jsonl(out / "corpus.jsonl", [{"docno": p, "_id": p, "text": t} for p, t in corpus.items()])
    write_qrels(population, out / "qrels.txt")  # the published qrels.txt's very convention
    population[["qid", "pair_id", "direction", "group", "preferred_pid", "counterpart_pid", "eligible"]].to_csv(
        out / "directions.tsv", sep="\t", index=False)
    write_run(fusion, out / "candidates.trec", tag=FUSION)
    for route, ranking in route_runs(pool).items():  # the route's own score, as it retrieved
        write_run(ranking, out / "runs" / f"{route}.trec", own_scores=True)
    top = ordered.assign(score=(sizes - ordered["rank"] + 1).to_numpy())
    if rank_llm_depth:
        top = top[top["rank"] <= rank_llm_depth]
    with (out / "rank_llm.jsonl").open("w", encoding="utf-8") as fh:
        for qid, rows in top.groupby("qid", sort=False):
            fh.write(json.dumps({"query": {"text": queries[qid], "qid": qid}, "candidates": [
                {"docid": p, "score": float(s), "doc": {"contents": corpus[p]}}
                for p, s in zip(rows["pid"], rows["score"])]}, ensure_ascii=False) + "\n")
    snapshot, parquet = ev.pool_snapshot(split)
    manifest = {
        "split": split, "contract": {**CONTRACT, "corpus": CONTRACT["corpus"][split]},
        "pool_snapshot": {"parquet_sha256": ev.pool_digest(split), "path": str(parquet), **snapshot},
        "candidates_order": {"profile": ev.profile.name, "ranker": FUSION,
                             "options": dict(ev.decl(FUSION).options) or "the protocol's fusion"},
        "counts": {"queries": len(pool_qids), "pool_rows": len(pool), "corpus_passages": len(corpus),
                   "eligible_directions": int(population["eligible"].astype(bool).sum()), "rank_llm_depth": rank_llm_depth or None},
        "settings": ev.settings.as_dict(), "profile": str(ev.profile.path),
        "data": ev.study.data_provenance(), "dataset": ev.study.dataset(),
    }
    manifest["files"] = folder_digests(out)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str), encoding="utf-8")
    return manifest


#: What a split folder of an export made before exports were transactions holds (adopted as the previous export).
LEGACY_MARKER = "manifest.json"


def export(ev: Evaluation, out: Path, rank_llm_depth: int = WINDOW_K,
           export_id: str | None = None) -> dict[str, Path]:
    """Export every split of the run's settings under ``out/<split>``, all swapped in together when complete.

    The same transaction as publishing (``reports.transaction``): the splits are staged in
    ``out/.runs/<export id>/`` and committed by one atomic rename, so a killed or interrupted export
    leaves the previous export whole. Splits of the previous export that this one does not write
    stay, carried into the new one as hard links (copies where the file system has none; only the files the suite
    wrote there, ``StagedRun.carry``). What a clean-up keeps because the suite did not write it is named once on
    stderr (docs/outputs.md#whose-folder). Whether an
    interrupted export was committed is whether ``out`` holds ``export_id`` (``reports.transaction.current_run``).
    """
    claim(out, ev.settings.splits, LEGACY_MARKER)  # a folder the suite did not make is refused, nothing written
    run = StagedRun(out, export_id or unique_run_id(), LEGACY_MARKER, names=ev.settings.splits)
    try:
        for split in ev.settings.splits:
            (run.folder / split).mkdir()
            export_split(ev, split, run.folder / split, rank_llm_depth)
        kept = run.carry(ev.settings.splits)
        run.commit([*ev.settings.splits, *kept])
    finally:
        run.close()
        if run.kept:
            print(kept_line(Path(out), run.kept), file=sys.stderr)
    return {split: Path(out) / split for split in ev.settings.splits}


def interrupted_message(out: Path, export_id: str, splits: Sequence[str]) -> str:
    """What an interrupt left, read from the folder itself: the commit is the one rename that puts ``export_id`` in
    place, so the message is true on either side of it."""
    if current_run(out) == export_id:
        return (f"interrupted after the export was committed: {out} holds the new export of "
                f"{', '.join(splits)}, whole")
    return f"interrupted: nothing exported; {out} keeps the previous export"


def main(argv: Sequence[str] | None = None) -> int:
    pin_cpu_kernels()  # as the suite does, before anything loads torch: a pool built here is the suite's pool
    parser = argument_parser("python -m harness.export", "Export the frozen pools (queries, corpus, qrels, "
                             "candidate and route runs, rank_llm requests) for reranking outside the suite.")
    parser.add_argument("--out", required=True, help="folder to write <split>/ into (replaced split by split)")
    parser.add_argument("--rank-llm-depth", type=int, default=WINDOW_K,
                        help="candidates per query in rank_llm.jsonl (default: the window, %(default)s; 0 = whole pool)")
    args = parser.parse_args(argv)
    try:
        if args.rank_llm_depth < 0:
            raise OptionError(f"--rank-llm-depth must be >= 0 (0 = the whole pool), got {args.rank_llm_depth}")
        settings = settings_from(lambda name: getattr(args, name))
        profile = read_profile(settings)
        settings = fit_to_data(settings, profile)  # the splits the declared dataset holds, its rows checked
        resolve_before_work(settings, profile, lambda decl: decl.name == FUSION)
        problem = claim_problem(path_option(args.out), settings.splits, LEGACY_MARKER)
        if problem is not None:  # docs/outputs.md#whose-folder: before any pool is built
            raise OptionError(f"--out: {problem}")
    except OptionError as exc:  # a bad option or profile, named, before any work
        parser.exit(2, f"error: {exc}\n")
    started, out, ident = time.perf_counter(), path_option(args.out), unique_run_id()
    try:
        written = export(Evaluation(settings, profile), out, args.rank_llm_depth, ident)
    except KeyboardInterrupt:
        print(interrupted_message(out, ident, settings.splits), file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"error: cannot export into {out} ({type(exc).__name__}: {exc}); it keeps the previous export",
              file=sys.stderr)
        return 1
    for split, path in written.items():
        print(f"[{split}] exported to {path}")
    print(f"export took {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
