"""A researcher's first hour, as the README tells it: their reranker in, the frozen pools out, nothing lost.

The README's "Evaluate your own reranker" walk-through, continued by the tutorial's step that brings another system's
run back (``docs/tutorial.md``), is run here as written, on the CI subset: its files are written into a home folder
of the test's own (``~/my-eval``: a factory in a folder outside the project, found through the profile's
``pythonpath``; an outside BM25 script), its commands run in order from the checkout, and the README's notebook
path runs as written where the library API (``harness.run``) is in the checkout.
Then the outside system's numbers are recomputed from its run file and the exported qrels with numpy alone and
must equal the suite's row. Failures that can be found before any work (a missing module, a model that is not
here, a bad ``--compare-to``) stop the run at once, naming the file and declaration, with nothing built or
published.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT, default_cache_dir

SUBSET = ("--subset-pairs", "24", "--grader-sample", "4")  # the CI scope
SPLITS = ("test", "confirmation")
#: Where the walk-through is: the README's section (to the next section), then the tutorial's step that brings another
#: system's run back and compares (to the next step).
SECTIONS = (("README.md", "## Evaluate your own reranker", "\n## "),
            ("docs/tutorial.md", "## 6. Another system's run, read back and compared", "\n## "))
#: The first line of the README's notebook block: run by its own test, not written as a file.
NOTEBOOK = "# In a notebook or script, run by ~/path/to/checkout/.venv/bin/python (import harness.run before torch)"


def _blocks(path: str, start: str, end: str) -> list[tuple[str, str, str]]:
    text = (PROJECT_ROOT / path).read_text(encoding="utf-8")
    begin = text.index(start)
    section = text[begin:text.index(end, begin + len(start))]
    return [(lang, body.split("\n", 1)[0], body) for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S)]


def readme_steps() -> list[tuple[str, str, str]]:
    """The walk-through's code blocks in order, the notebook block aside: (language, first line, body)."""
    return [b for path, start, end in SECTIONS for b in _blocks(path, start, end) if b[1] != NOTEBOOK]


def notebook_block() -> str:
    """The README's notebook path, as written."""
    [body] = [body for _, first, body in _blocks(*SECTIONS[0]) if first == NOTEBOOK]
    return body


def in_home(text: str, home: Path) -> str:
    return text.replace("~/", f"{home}/")


def run_readme(home: Path) -> list[subprocess.CompletedProcess]:
    """Write the README's files and run its commands (CI subset appended to the suite's commands)."""
    env = {**os.environ, "HOME": str(home), "NEVIR_CACHE_DIR": str(default_cache_dir()), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    results = []
    for lang, first, body in readme_steps():
        if lang in ("python", "toml"):
            match = re.fullmatch(r"# (append to )?(~/\S+)", first)
            assert match, f"walk-through {lang} block must start with '# ~/path' or '# append to ~/path': {first!r}"
            target = Path(in_home(match.group(2), home))
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if match.group(1) else "w", encoding="utf-8") as fh:
                fh.write(body)
            continue
        assert lang == "bash", lang
        for command in filter(None, body.splitlines()):
            # the export takes the run's subset options, --grader-sample included: a capped sample's first pairs are
            # part of the subset (docs/statistics.md#samples)
            extra = SUBSET if " -m pytest " in command or " -m harness.export " in command else ()
            done = subprocess.run(["bash", "-c", " ".join([command, *extra])], cwd=PROJECT_ROOT, env=env,
                                  capture_output=True, text=True, timeout=3600)
            assert done.returncode in ((0, 1) if " -m pytest " in command else (0,)), \
                f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            if done.returncode:
                walkthrough_failures_are_not_its_own(command, done.stdout)
            results.append(done)
    return results


def walkthrough_failures_are_not_its_own(command: str, stdout: str) -> None:
    """A spec run exits 1 when any spec fails, e.g. a pin of an embedded ranker the profile inherits (the CI's own
    spec run checks those). What this walk-through declares must not fail, and nothing may error."""
    failed = re.findall(r"^(FAILED|ERROR) (\S+)", stdout, re.M)
    assert failed and all(kind == "FAILED" for kind, _ in failed), f"{command}\n{stdout[-4000:]}"
    own = [test for _, test in failed if re.search(r"my_reranker|bm25_outside", test)]
    assert not own, f"{command}: the walk-through's own rankers failed {own}\n{stdout[-4000:]}"
    print(f"{command}: inherited failures, not the walk-through's: {[test for _, test in failed]}")


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    home = tmp_path_factory.mktemp("home")
    started = time.perf_counter()
    commands = run_readme(home)
    print(f"README walk-through on the CI subset: {time.perf_counter() - started:.1f} s")
    # -m "not llm" selects: the README's runs are published under results/partial/
    return {"home": home, "eval": home / "my-eval", "results": home / "my-eval" / "results" / "partial",
            "commands": commands}


def test_the_readme_walkthrough_runs_as_written_and_keeps_the_factory_outside_the_project(walkthrough) -> None:
    steps = readme_steps()
    assert [s[0] for s in steps].count("bash") >= 4
    mycode = walkthrough["eval"] / "mycode" / "my_reranker.py"
    assert mycode.is_file() and not mycode.resolve().is_relative_to(PROJECT_ROOT)
    for split in SPLITS:
        t2 = pd.read_csv(walkthrough["results"] / split / "table2.csv").set_index("ranker")
        assert {"fusion", "my_reranker", "bm25_outside"} <= set(t2.index)
        assert t2.loc["my_reranker", "n"] == t2.loc["fusion", "n"] and t2.loc["my_reranker", "fallback"] == 0
        claims = pd.read_csv(walkthrough["results"] / split / "claims.csv")["claim"].tolist()
        assert "h2_my_reranker_strict_gt_fusion" in claims
    shown = walkthrough["commands"][1].stdout  # the README's command that prints the row
    assert "my_reranker" in shown and "strict_pct" in shown


def test_the_readme_notebook_path_runs_as_written(walkthrough) -> None:
    """From a folder outside the checkout, evaluate() with the user's object added prints its row beside fusion and
    its claims, and publish() writes the run (partial: the grader is left out) where the README says."""
    home = walkthrough["home"]
    env = {**os.environ, "HOME": str(home), "NEVIR_CACHE_DIR": str(default_cache_dir()), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)  # the venv finds the suite itself (the setup's .pth), as a user's notebook does
    done = subprocess.run([sys.executable, "-c", notebook_block()], cwd=home, env=env, capture_output=True,
                          text=True, timeout=3600)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "mine" in done.stdout and "strict_pct" in done.stdout and "h2_mine_strict_gt_fusion" in done.stdout
    t2 = pd.read_csv(home / "my-eval" / "results-notebook" / "partial" / "test" / "table2.csv").set_index("ranker")
    assert {"fusion", "mine"} <= set(t2.index) and t2.loc["mine", "n"] == t2.loc["fusion", "n"]


def test_the_factorys_judgments_and_cost_are_published(walkthrough) -> None:
    results = walkthrough["results"] / "test"
    judgments = pd.read_csv(results / "judgments.csv")
    mine = judgments[(judgments["ranker"] == "my_reranker") & (judgments["scope"] == "window")]
    t2 = pd.read_csv(results / "table2.csv").set_index("ranker")
    assert len(mine) > 0 and not mine["unavailable"].any() and mine["score"].between(0, 1).all()
    assert (mine["score"] == mine["rule_score"]).all() and mine["seconds"].gt(0).all()
    cost = pd.read_csv(results / "cost.csv").set_index("stage")
    # It reports no time of its own: the suite times its batches, so its real work never costs 0 s.
    assert cost.loc["my_reranker_window", "wall_s"] > 0 and cost.loc["my_reranker_window", "timed_by_suite"] > 0
    assert cost.loc["bm25_outside_rank", "judgments"] > 0 and cost.loc["fusion_rank", "wall_s"] >= 0
    assert int(t2.loc["my_reranker", "n"]) > 0


def _independent(run: Path, qrels: Path, directions: Path) -> dict[str, float]:
    """Strict preference, ties and preferred-passage MRR from the run file, the exported qrels (the preferred
    passage of each eligible direction) and ``directions.tsv`` (its counterpart), numpy only.

    List position among equal run scores follows the run's rank column (the suite's rule for a run's ranked
    passages); a tie of the two designated passages' scores is a failure.
    """
    r = pd.read_csv(run, sep=r"\s+", header=None, names=["qid", "q0", "pid", "rank", "score", "tag"])
    q = pd.read_csv(qrels, sep=r"\s+", header=None, names=["qid", "it", "pid", "rel"])
    score = dict(zip(zip(r["qid"], r["pid"]), r["score"].astype(float)))
    r = r.sort_values(["qid", "score", "rank"], ascending=[True, False, True])
    position = dict(zip(zip(r["qid"], r["pid"]), r.groupby("qid").cumcount().to_numpy() + 1))
    pos = q[q["rel"] == 1].set_index("qid")["pid"]
    neg = pd.read_csv(directions, sep="\t").set_index("qid")["counterpart_pid"].reindex(pos.index)
    a = np.array([score[(k, p)] for k, p in pos.items()])
    b = np.array([score[(k, p)] for k, p in neg.items()])
    rr = np.array([1.0 / position[(k, p)] for k, p in pos.items()])
    return {"n": len(a), "strict": int((a > b).sum()), "ties": int((a == b).sum()), "mrr": float(rr.mean())}


@pytest.mark.parametrize("split", SPLITS)
def test_the_outside_run_reads_back_with_the_outside_systems_own_numbers(walkthrough, split: str) -> None:
    pools, runs, results = walkthrough["eval"] / "pools", walkthrough["eval"] / "runs", walkthrough["results"]
    mine = _independent(runs / f"{split}.trec", pools / split / "qrels.txt", pools / split / "directions.tsv")
    row = pd.read_csv(results / split / "table2.csv").set_index("ranker").loc["bm25_outside"]
    assert (int(row["n"]), int(row["strict"]), int(row["ties"])) == (mine["n"], mine["strict"], mine["ties"])
    assert row["mrr"] == pytest.approx(mine["mrr"], rel=1e-12)
    coverage = pd.read_csv(results / split / "coverage.csv").set_index("ranker").loc["bm25_outside"]
    candidates = sum(1 for _ in (pools / split / "candidates.trec").open())
    assert coverage["pool_passages"] == coverage["ranked_in_pool"] == candidates
    assert coverage["unranked_in_pool"] == coverage["ranked_outside_pool"] == coverage["other_split_qids"] == 0
    assert coverage["ties_equal_score"] == mine["ties"] and coverage["ties_both_unranked"] == 0
    manifest = json.loads((results / split / "manifest.json").read_text())
    assert manifest["coverage:bm25_outside"]["ranked_in_pool"] == candidates


@pytest.mark.parametrize("split", SPLITS)
def test_the_exported_files_read_as_they_are_with_outside_tools(walkthrough, split: str) -> None:
    import ir_measures

    folder = walkthrough["eval"] / "pools" / split
    manifest = json.loads((folder / "manifest.json").read_text())
    run = list(ir_measures.read_trec_run(str(folder / "candidates.trec")))
    qrels = list(ir_measures.read_trec_qrels(str(folder / "qrels.txt")))
    assert len(run) == manifest["counts"]["pool_rows"] and len(qrels) == manifest["counts"]["eligible_directions"]
    assert {q.query_id for q in qrels} <= {r.query_id for r in run}
    for route in ("dense", "sparse", "bm25"):
        assert len(list(ir_measures.read_trec_run(str(folder / "runs" / f"{route}.trec")))) > 0
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").open()]
    assert all(re.fullmatch(r"p[0-9a-f]{16}", d["docno"]) and d["docno"] == d["_id"] for d in corpus)
    requests = [json.loads(line) for line in (folder / "rank_llm.jsonl").open()]
    assert len(requests) == manifest["counts"]["queries"]
    assert set(requests[0]) == {"query", "candidates"} and set(requests[0]["query"]) == {"text", "qid"}
    candidate = requests[0]["candidates"][0]
    assert set(candidate) == {"docid", "score", "doc"} and "contents" in candidate["doc"]
    assert all(len(r["candidates"]) <= 20 for r in requests)
    assert manifest["pool_snapshot"]["parquet_sha256"] and "_q1" in manifest["contract"]["qid"]
    results = walkthrough["results"] / split
    published = json.loads((results / "manifest.json").read_text())["pool"]
    # the very pool snapshot the run evaluated: same identity (cache key), same bytes
    assert (manifest["pool_snapshot"]["path"], manifest["pool_snapshot"]["parquet_sha256"]) == \
        (published["path"], published["parquet_sha256"])


@pytest.mark.parametrize("split", SPLITS)
def test_one_qrels_convention_and_the_published_runs_read_back_with_outside_tools(walkthrough, split: str) -> None:
    import ir_measures

    exported, results = walkthrough["eval"] / "pools" / split, walkthrough["results"] / split
    assert (exported / "qrels.txt").read_bytes() == (results / "qrels.txt").read_bytes()
    t2 = pd.read_csv(results / "table2.csv").set_index("ranker")
    qrels = list(ir_measures.read_trec_qrels(str(results / "qrels.txt")))
    measures = [ir_measures.RR, ir_measures.Success @ 1]
    checked = 0
    for ranker in t2.index:
        run = results / "runs" / f"{ranker}.trec"
        if not run.is_file():  # a designated-only ranker has outcomes but no ranking
            continue
        # The runs carry the rankers' own scores, ties visible; trec_eval's convention puts the larger id first among
        # equal scores, so the list order is given as the score, as docs/outputs.md#re-checking says.
        ranked = [ir_measures.ScoredDoc(qid, doc, -float(rank))
                  for qid, _, doc, rank, *_ in (line.split() for line in run.read_text().splitlines())]
        # A sampled ranker's run and row cover its sample: judge those queries (ir_measures counts a judged query
        # missing from the run as 0).
        covered = {r.query_id for r in ranked}
        found = ir_measures.calc_aggregate(measures, [q for q in qrels if q.query_id in covered], ranked)
        assert found[ir_measures.RR] == pytest.approx(t2.loc[ranker, "mrr"], abs=5e-7), ranker
        assert 100 * found[ir_measures.Success @ 1] == pytest.approx(t2.loc[ranker, "pref_at_1"], abs=5e-5), ranker
        checked += 1
    assert checked >= 3 and {"fusion", "my_reranker", "bm25_outside"} <= set(t2.index)


@pytest.mark.parametrize("split", SPLITS)
def test_ranx_reads_the_published_files_with_make_comparable(walkthrough, split: str) -> None:
    ranx = pytest.importorskip("ranx", reason="ranx is not installed here (pip install ranx)")
    results = walkthrough["results"] / split
    qrels = ranx.Qrels.from_file(str(results / "qrels.txt"), kind="trec")
    run = ranx.Run.from_file(str(results / "runs" / "fusion.trec"), kind="trec")
    assert len(run.keys()) > len(qrels.keys())  # runs hold every pool query, qrels the eligible directions only
    mrr = ranx.evaluate(qrels, run, "mrr", make_comparable=True)
    assert mrr == pytest.approx(pd.read_csv(results / "table2.csv").set_index("ranker").loc["fusion", "mrr"], abs=5e-7)


@pytest.mark.parametrize("split", SPLITS)
def test_rank_llm_reads_the_exported_requests(walkthrough, split: str) -> None:
    pytest.importorskip("rank_llm", reason="rank_llm is not installed here (pip install --no-deps rank-llm)")
    from rank_llm.data import read_requests_from_file

    folder = walkthrough["eval"] / "pools" / split
    requests = read_requests_from_file(str(folder / "rank_llm.jsonl"))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert len(requests) == manifest["counts"]["queries"]
    assert all(r.query.qid and 0 < len(r.candidates) <= 20 for r in requests)


def test_the_comparison_matches_rankers_by_name_and_lists_one_sided_ones(walkthrough) -> None:
    for split in SPLITS:
        comparison = pd.read_csv(walkthrough["results"] / split / "comparison.csv")
        sides = comparison.drop_duplicates("ranker").set_index("ranker")["side"]
        assert sides["bm25_outside"] == "this run only" and sides["my_reranker"] == "both"
        same = comparison[(comparison["ranker"] == "my_reranker") & (comparison["measure"] == "strict")]
        assert (same["delta"] == 0).all()  # the same scores, read back from the cache
        # compared while this run was written, before it replaced the saved one: paired on the same directions
        assert (same["basis"] == "paired").all() and (same["decision"] != "changed").all()
        manifest = json.loads((walkthrough["results"] / split / "manifest.json").read_text())
        assert "comparison.csv" in manifest["files"]  # published in the same step as the rest of the run
        assert "Comparison with a saved run" in (walkthrough["results"] / split / "report.md").read_text()


# ---- failures found before any work ------------------------------------------------------------------------


def run_specs(args: list[str], cache: Path, results: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    full_env = {**os.environ, "NEVIR_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    for key in [k for k, v in env.items() if v == ""]:
        del full_env[key]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                           *SUBSET, "--results-dir", str(results), *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, env=full_env, timeout=600)
    return done, time.perf_counter() - started


def assert_nothing_done(cache: Path, results: Path) -> None:
    assert not any((cache / d).exists() for d in ("pools", "models", "scores", "memo")), sorted(cache.glob("*"))
    assert not any(results.glob("*")) if results.exists() else True


def test_a_missing_module_stops_the_run_before_any_work_naming_file_and_ranker(tmp_path: Path) -> None:
    profile = tmp_path / "mine.toml"
    profile.write_text('[profile]\nname = "mine"\nextends = "embedded"\npythonpath = ["."]\n'
                       '[rankers.mine]\nkind = "python"\nfactory = "no_such_module:make"\n', encoding="utf-8")
    done, seconds = run_specs(["--profile", str(profile)], tmp_path / "cache", tmp_path / "results")
    print(f"missing module: usage error after {seconds:.1f} s (whole pytest process)")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(rf"{re.escape(str(profile))} \[rankers\.mine\]: factory 'no_such_module:make': module "
                     r"'no_such_module' is not found on sys\.path.*pythonpath", done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    assert_nothing_done(tmp_path / "cache", tmp_path / "results")


def test_the_paper_profile_offline_stops_before_any_work_naming_the_route_model_and_the_fixes(tmp_path: Path) -> None:
    done, seconds = run_specs(["--profile", "paper"], tmp_path / "cache", tmp_path / "results")
    print(f"paper profile offline: usage error after {seconds:.1f} s (whole pytest process)")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"paper\.toml \[models\] dense: dense route model 'Qwen/Qwen3-Embedding-0\.6B' .*"
                     r"huggingface-cli download Qwen/Qwen3-Embedding-0\.6B.*allow the hub", done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    assert_nothing_done(tmp_path / "cache", tmp_path / "results")


def test_an_unreachable_hub_fails_in_one_request_not_a_retry_cascade(tmp_path: Path) -> None:
    """Hub allowed but unreachable (nothing listens at the endpoint): one lookup, then the model and the fixes."""
    profile = tmp_path / "mine.toml"
    profile.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                       '[rankers.hub_ce]\nkind = "cross_encoder"\nmodel = "no-such-org/no-such-reranker"\n',
                       encoding="utf-8")
    done, seconds = run_specs(["--profile", str(profile)], tmp_path / "cache", tmp_path / "results",
                              HF_HUB_OFFLINE="", TRANSFORMERS_OFFLINE="", HF_ENDPOINT="http://127.0.0.1:9")
    print(f"unreachable hub: usage error after {seconds:.1f} s (whole pytest process)")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\[rankers\.hub_ce\]: cross_encoder model 'no-such-org/no-such-reranker' is not in the local "
                     r"Hugging Face cache and the hub cannot be reached .*huggingface-cli download", done.stderr)
    assert_nothing_done(tmp_path / "cache", tmp_path / "results")


def test_a_bad_compare_to_stops_the_run_before_any_work(tmp_path: Path) -> None:
    done, _ = run_specs(["--compare-to", "no-such-run"], tmp_path / "cache", tmp_path / "results")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--compare-to 'no-such-run' is neither a saved run id under" in done.stderr
    half = tmp_path / "half"
    (half / "test").mkdir(parents=True)
    (half / "test" / "table2.csv").write_text("ranker,n\nfusion,1\n", encoding="utf-8")
    done, _ = run_specs(["--compare-to", str(half)], tmp_path / "cache", tmp_path / "results")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--compare-to {half}: holds no confirmation/manifest.json (no published split 'confirmation')" \
        in done.stderr
    assert_nothing_done(tmp_path / "cache", tmp_path / "results")


def test_a_check_carries_the_marks_of_every_ranker_it_computes(tmp_path: Path) -> None:
    """An unmarked ranker whose row needs the grader (its baseline), and an unmarked twin of the pair grader whose
    designated-vs-window check would score the window grader, are deselected by -m "not llm" with it."""
    profile = tmp_path / "mine.toml"
    profile.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                       '[rankers.cheap]\nkind = "fusion"\npopulation = "grader_pairs"\ncompare_to = "grader_pairs"\n'
                       '[rankers.server_pairs]\nlike = "grader_pairs"\nmarks = []\n'
                       # the window grader: declared, not enabled
                       '[rankers.grader]\nenabled = true\n', encoding="utf-8")
    args = ["--profile", str(profile), "--collect-only", "-q"]
    everything, _ = run_specs(args, tmp_path / "cache", tmp_path / "results")
    assert everything.returncode == 0, everything.stderr[-3000:]
    assert "test_table2_row[test-cheap]" in everything.stdout
    assert "server_pairs-vs-grader" in everything.stdout
    cheap, _ = run_specs([*args, "-m", "not llm"], tmp_path / "cache", tmp_path / "results")
    assert cheap.returncode == 0, cheap.stderr[-3000:]
    assert "test_table2_row[test-cheap]" not in cheap.stdout and "server_pairs-vs-grader" not in cheap.stdout
    assert "test_table2_row[test-fusion]" in cheap.stdout


def test_a_spec_whose_baseline_the_marks_leave_out_is_skipped_naming_it(tmp_path: Path) -> None:
    """-m llm keeps the grader's H2 claims (marked llm) but not fusion, their baseline: each is skipped naming the
    ranker it needs (it failed with a KeyError about an uncomputed part)."""
    done, _ = run_specs(["-m", "llm", "-k", "h2_grader_pairs_strict", "-rs"], tmp_path / "cache",
                        tmp_path / "results")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 skipped" in done.stdout and "needs fusion, which this run's selection (-m) does not compute" \
        in done.stdout and "KeyError" not in done.stdout
