"""Batch files without a model (``docs/protocol.md#batch-files``): the import's line-by-line refusals, what it
stores (the online path's rows), and the export's one-round-at-a-time view of sequential judges.

The end-to-end round trip through a real llama.cpp server is ``tests/harness/test_scale_out.py``; Ray Data over an
exported file (README "Scale out", recipe d) is here, where ``ray`` is installed.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import httpx
import pytest

from harness.batch_export import FORMAT, ROUTE, VERSION, BatchError, custom_id
from harness.batch_import import import_results
from rankers.kinds import kind
from rankers.scorers.cache import ScoreCache
from rankers.scorers.grader import LLMGrader
from rankers.scorers.judgment_records import Request, request_key, store_outcomes
from rankers.scorers.judgments import plan_requests
from rankers.scorers.listwise import ListwiseJudge, sliding_windows
from rankers.scorers.llm.generation import Generation, GenerationSettings
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from rankers.scorers.pointwise import score_with_cache

SETTINGS = GenerationSettings(thinking=False, logprobs=5)


def _reply(content: str, model: str = "m") -> dict:
    return {"model": model, "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                                         "logprobs": {"content": [{"token": content, "logprob": math.log(0.8),
                                                                   "top_logprobs": [
                                                                       {"token": content, "logprob": math.log(0.8)},
                                                                       {"token": "1", "logprob": math.log(0.2)}]}]}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1}}


def _export(folder: Path, grader: LLMGrader, inputs: list[tuple[str, str, str, str]]) -> list[dict]:
    """An export folder for ``inputs`` as ``harness.batch export`` writes it (requests, index, manifest)."""
    from fixtures.identity import text_digest as text_hash

    folder.mkdir(parents=True, exist_ok=True)
    requests, index = [], []
    for _, pid, query, passage in inputs:
        key = (grader.model_key, text_hash(query), pid, text_hash(passage))
        body, truncated = grader.backend.request(grader.grade_prompt(query, passage))
        requests.append({"custom_id": custom_id(key), "method": "POST", "url": ROUTE, "body": body})
        index.append({"custom_id": custom_id(key), "key": list(key), "truncated": truncated})
    (folder / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    (folder / "g.index.jsonl").write_text("".join(json.dumps(e) + "\n" for e in index))
    (folder / "manifest.json").write_text(json.dumps({
        "format": FORMAT, "version": VERSION, "cache_dir": str(folder / "scores"), "judges": [
            {"file": "g.jsonl", "index": "g.index.jsonl", "judge_key": grader.model_key, "kind": "llm_grader",
             "reading": "grade", "model": "m", "prompt_version": grader.prompt.key,
             "near_tie_margin": grader.near_tie_margin, "max_reply_chars": 65536, "count": len(requests)}]}))
    return requests


def _grade_of(body: dict) -> str:
    """The stub's grade for a request: its passage number modulo 5 (the same rule for the online and batch paths)."""
    return str(int(body["messages"][1]["content"].split("passage ")[1].split()[0].strip("<>/")) % 5)


def _line(request: dict, content: str, **changes) -> str:
    row = {"id": "b", "custom_id": request["custom_id"], "error": None,
           "response": {"status_code": 200, "request_id": "r", "body": _reply(content)}}
    row.update(changes)
    return json.dumps(row)


INPUTS = [(f"q{i}", f"p{i}", f"query {i}", f"passage {i}") for i in range(9)]


def test_a_result_file_is_checked_line_by_line_and_only_sound_lines_are_stored(tmp_path):
    grader = LLMGrader(OpenAIBackend("http://127.0.0.1:9/v1", "m", settings=SETTINGS))
    requests = _export(tmp_path / "export", grader, INPUTS)
    foreign = json.loads(_line(requests[1], "3"))
    foreign["custom_id"] = "0" * 64
    other_model = json.loads(_line(requests[4], "3"))
    other_model["response"]["body"]["model"] = "x"
    lines = [
        _line(requests[0], "3")[:40],                      # 1: cut
        json.dumps(foreign),                               # 2: not this export's
        _line(requests[2], "2"),                           # 3: repeated by 4
        _line(requests[2], "2"),                           # 4
        json.dumps(other_model),                           # 5: another model
        _line(requests[5], "banana"),                      # 6: no grade
        _line(requests[6], "1", error={"message": "boom"}),  # 7: failed request
        json.dumps({"custom_id": requests[7]["custom_id"], "error": None,
                    "response": {"status_code": 200, "body": {"model": "m", "choices": []}}}),  # 8: off the contract
        _line(requests[3], "4"),                           # 9: sound
    ]
    results = tmp_path / "export" / "g.results.jsonl"
    results.write_text("\n".join(lines) + "\n")
    done = import_results(results, tmp_path / "export")
    text = "\n".join(done.problems)
    for expected in ("line 1: not JSON", "line 2: custom_id 0000000000000000… is not a request of this export",
                     "line 4: custom_id", "repeats line 3", "line 3: custom_id", "is repeated later; not stored",
                     "line 5: answered by model 'x', expected 'm'", "line 6: no readable grade",
                     "line 7: the request failed", "line 8: malformed reply",
                     "missing: g.jsonl line 1", "missing: g.jsonl line 2", "missing: g.jsonl line 9"):
        assert expected in text, (expected, text)
    assert done.stored == 1 and done.missing == 3  # requests 1, 2 and 9 have no line of their own
    with ScoreCache.in_folder(tmp_path / "export" / "scores") as cache:
        stored, _ = cache.lookup(tuple(e) for e in map(lambda r: json.loads(r)["key"],
                                                        (tmp_path / "export" / "g.index.jsonl").read_text().splitlines()))
    assert [k[2] for k in stored] == ["p3"] and stored[next(iter(stored))].score == 4.0


def _online(tmp_path: Path):
    """A grader answered online by the stub rule (``_grade_of``), and its judgments of ``INPUTS``."""
    online = LLMGrader(OpenAIBackend("http://127.0.0.1:9/v1", "m", settings=SETTINGS, transport=httpx.MockTransport(
        lambda request: httpx.Response(200, json=_reply(_grade_of(json.loads(request.content)))))))
    with ScoreCache(tmp_path / "online.sqlite") as cache:
        return online, score_with_cache(online, INPUTS, cache, progress=False)


def test_an_imported_judgment_is_the_row_the_online_path_stores(tmp_path):
    """Same grade, probabilities, margin and reply; the endpoint says batch, and a batch result has no latency."""
    online, live = _online(tmp_path)
    requests = _export(tmp_path / "export", online, INPUTS)
    results = tmp_path / "export" / "g.results.jsonl"
    results.write_text("".join(_line(r, str(i % 5)) + "\n" for i, r in enumerate(requests)))
    done = import_results(results, tmp_path / "export")
    assert done.problems == [] and done.stored == len(INPUTS)
    with ScoreCache.in_folder(tmp_path / "export" / "scores") as cache:
        again = score_with_cache(online, INPUTS, cache, progress=False)
    assert again.n_scored == 0 and again.scores == live.scores  # read from the cache, the same grades
    for a, b in zip(live.frame["usage"], again.frame["usage"]):
        assert a["endpoint"] == "http://127.0.0.1:9/v1" and b["endpoint"] == "batch:g.results.jsonl"
        assert math.isnan(b["latency_s"]) and not math.isnan(a["latency_s"])
        assert a["wall_s"] >= 0 and "wall_s" not in b  # a share of measured wall-clock: a batch result has none
        skip = {"endpoint", "latency_s", "wall_s"}
        assert {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}
    assert list(live.frame["raw"]) == list(again.frame["raw"])


def test_a_folder_without_an_export_manifest_is_refused(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text("{}\n")
    with pytest.raises(BatchError, match="no export manifest"):
        import_results(results, tmp_path)


def test_a_sequential_judge_is_exported_one_round_at_a_time(tmp_path):
    """RankGPT's sliding sub-windows: the second sub-window is cut from the first one's answer, so an export holds
    each window's next step only, and a window whose steps are all stored has nothing left."""
    judge_key = "listwise-test"
    items = tuple((f"p{i}", f"passage {i}") for i in range(3))

    def algorithms():
        return {("q1", "main"): sliding_windows("query", items, 3, 2, 1)}

    def pending_requests(judge_key: str, cache: ScoreCache, algorithms) -> dict:
        """What an export writes: each window's next step (the plan's third part)."""
        return plan_requests(judge_key, cache, algorithms, kind("llm_listwise").placeholder)[2]

    with ScoreCache(tmp_path / "s.sqlite") as cache:
        first = pending_requests(judge_key, cache, algorithms())
        assert [r.pids for r in first.values()] == [("p1", "p2")]  # the back sub-window first
        (key, request), = first.items()
        answer = ListwiseJudge.outcome(Generation("[2] > [1]", 10, 3, 0.0), len(request.items))
        store_outcomes(cache, [key], [answer])
        second = pending_requests(judge_key, cache, algorithms())
        assert [r.pids for r in second.values()] == [("p0", "p2")]  # cut from the first answer's order
        store_outcomes(cache, list(second), [ListwiseJudge.outcome(Generation("[1] > [2]", 10, 3, 0.0), 2)])
        assert pending_requests(judge_key, cache, algorithms()) == {}
        assert request_key(judge_key, Request("query", (("p0", "passage 0"), ("p2", "passage 2")))) in second


def test_custom_ids_are_one_to_one_with_cache_keys():
    keys = [("k", "a" * 64, f"p{i}", "b" * 64) for i in range(1000)] + [("k2", "a" * 64, "p0", "b" * 64)]
    assert len({custom_id(k) for k in keys}) == len(keys)
    assert custom_id(keys[0]) == custom_id(tuple(keys[0]))


def test_ray_data_answers_an_exported_file_as_the_online_path_does(tmp_path):
    """Recipe (d) in local mode, as the README writes it: each line read as text and parsed on its own (``read_json``
    would merge the lines' bodies into one schema and send a field one line lacks as ``null``), posted to an
    endpoint, the results imported; the cache then holds the online path's grades. ``ray`` is optional (not in the
    lock): this runs where it is installed, and ``.ci/run`` installs it beside the venv and sets NEVIR_REQUIRE_RAY=1."""
    try:
        import ray
    except ImportError:
        why = "ray is not installed (optional: README 'Scale out', recipe d)"
        if os.environ.get("NEVIR_REQUIRE_RAY") == "1":
            pytest.fail(why + "; NEVIR_REQUIRE_RAY=1 (CI) does not allow skipping it")
        pytest.skip(why)

    from tests.support.chat_server import chat_server

    online, live = _online(tmp_path)
    requests = _export(tmp_path / "export", online, INPUTS)
    for i, request in enumerate(requests):  # lines of one file need not share their fields (extra_body, seeds)
        if i % 2:
            request["body"]["grammar"] = "root ::= [0-4]"
        if i % 3 == 0:
            request["body"]["seed"] = i
    (tmp_path / "export" / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    with chat_server(lambda body: _reply(_grade_of(body))) as (url, received):
        def answer(line: str) -> dict:
            row = json.loads(line)
            reply = httpx.post(url.removesuffix("/v1") + row["url"], json=row["body"], timeout=60)
            return {"custom_id": row["custom_id"], "error": None,
                    "response": {"status_code": reply.status_code, "body": reply.json()}}

        ray.init(num_cpus=1, include_dashboard=False, ignore_reinit_error=True)
        try:
            rows = (ray.data.read_text(str(tmp_path / "export" / "g.jsonl"))
                    .map(lambda r: answer(r["text"])).take_all())
        finally:
            ray.shutdown()
    assert sorted(map(json.dumps, received)) == sorted(json.dumps(r["body"]) for r in requests)  # each body verbatim
    results = tmp_path / "export" / "g.results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = import_results(results, tmp_path / "export")
    assert done.problems == [] and done.stored == len(INPUTS)
    with ScoreCache.in_folder(tmp_path / "export" / "scores") as cache:
        again = score_with_cache(online, INPUTS, cache, progress=False)
    assert again.n_scored == 0 and again.scores == live.scores


def test_an_export_swaps_in_whole_and_one_stopped_at_its_commit_leaves_the_previous_export(tmp_path, monkeypatch):
    """The export folder holds the previous export or the new one, never a mix and never nothing (the transaction
    results publish by); a result file the user keeps in it survives every export."""
    from types import SimpleNamespace

    import harness.batch_export as batch_export
    import reports.transaction as transaction
    from harness.batch_export import JudgeExport, write_export

    def judges(n: int) -> list[JudgeExport]:
        judge = JudgeExport("g", "judge-key", "llm_grader", "m", "v1", None, 65536, ["grader"])
        for i in range(n):
            judge.add(("judge-key", "q", f"p{i}", "t"), {"n": i}, False)
        return [judge]

    def requests(out: Path) -> list[int]:
        return [json.loads(line)["body"]["n"] for line in (out / "g.jsonl").read_text().splitlines()]

    ev = SimpleNamespace(profile=SimpleNamespace(path=tmp_path / "mine.toml"),
                         settings=SimpleNamespace(cache=lambda *parts: tmp_path / "cache" / Path(*parts),
                                                  splits=("test",), subset_pairs=None, grader_sample=None))
    out = tmp_path / "export"
    out.mkdir()
    (out / "g.results.jsonl").write_text("the user's results\n")
    monkeypatch.setattr(batch_export, "collect", lambda ev, names: judges(2))
    first = write_export(ev, out, ["grader"], {})
    assert requests(out) == [0, 1] and json.loads((out / "manifest.json").read_text()) == first

    real = transaction._replace_link

    def stopped(link: Path, target: str) -> None:
        if link.name == transaction.CURRENT:
            raise OSError("No space left on device")  # the commit's rename never happens
        real(link, target)

    monkeypatch.setattr(transaction, "_replace_link", stopped)
    monkeypatch.setattr(batch_export, "collect", lambda ev, names: judges(3))
    with pytest.raises(OSError, match="No space left"):
        write_export(ev, out, ["grader"], {})
    assert requests(out) == [0, 1] and json.loads((out / "manifest.json").read_text()) == first
    assert [p.name for p in (out / transaction.RUNS).iterdir() if p.is_dir()] == [transaction.current_run(out)]

    monkeypatch.setattr(transaction, "_replace_link", real)
    second = write_export(ev, out, ["grader"], {})
    assert requests(out) == [0, 1, 2] and second["judges"][0]["count"] == 3
    assert (out / "g.results.jsonl").read_text() == "the user's results\n"
    assert [p.name for p in (out / transaction.RUNS).iterdir() if p.is_dir()] == [transaction.current_run(out)]


def _grader_profile(folder: Path, url: str) -> Path:
    path = folder / "mine.toml"
    path.write_text(f'[profile]\nname = "mine"\nextends = "embedded"\n[rankers.oa]\nkind = "llm_grader"\n'
                    f'backend = "openai"\nurl = "{url}"\nmodel = "m"\n', encoding="utf-8")
    return path


def test_an_export_checks_no_server_and_says_so_once(tmp_path, monkeypatch, capsys):
    """It printed "declaration refused before any work: ... unreachable" and then exported anyway."""
    import harness.batch as batch
    from fixtures import progress
    from tests.support.loopback import free_port

    monkeypatch.setattr(progress, "_CONFIG", progress._Config())  # progress lines to this test's stderr
    sessions = []
    monkeypatch.setattr(batch, "write_export", lambda ev, out, names, skipped: sessions.append(ev) or {
        "judges": [], "skipped": []})
    profile = _grader_profile(tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    assert batch.main(["export", "--out", str(tmp_path / "out"), "--profile", str(profile), "--splits", "test",
                       "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["exporting without checking any server (a batch export sends nothing): the requests "
                                "of oa"]
    assert "declaration refused" not in out + err and "unreachable" not in out + err
    assert sessions[0].refused == {} == sessions[0].offline


def test_a_run_whose_judgments_are_all_stored_needs_no_server(tmp_path, monkeypatch, capsys):
    """After an import the grader's server is gone: the ranker is judged from the score cache alone; a judgment
    the cache lacks fails its rows with the server check's message, and nothing is sent."""
    from fixtures import progress
    from fixtures.settings import Settings
    from harness.profile import load_profile
    from harness.session import Evaluation
    from rankers.kinds.base import KindBuildError
    from tests.support.chat_server import chat_reply, chat_server

    monkeypatch.setattr(progress, "_CONFIG", progress._Config())
    monkeypatch.setattr(Evaluation, "_snapshot", lambda self, split: pytest.fail(f"a pool of {split} was built"))
    judged = list(INPUTS)
    monkeypatch.setattr(Evaluation, "inputs", lambda self, split, name, scope: judged)
    settings = Settings(cache_dir=tmp_path / "cache")
    with chat_server(lambda body: chat_reply("3")) as (url, bodies):
        profile = _grader_profile(tmp_path, url)
        live = Evaluation(settings, load_profile(str(profile))).text_scores("test", "oa", "window")
    assert len(bodies) == len(INPUTS) and live.n_scored == len(INPUTS)
    capsys.readouterr()

    ev = Evaluation(settings, load_profile(str(profile)))  # the server no longer answers
    err = capsys.readouterr().err
    assert ev.refused == {} and list(ev.offline) == ["oa"] and "declaration refused" not in err
    assert f"judging from the score cache alone: {profile} [rankers.oa]: grader URL" in err
    again = ev.text_scores("test", "oa", "window")
    assert again.n_scored == 0 and again.scores == live.scores

    judged.append(("q9", "p9", "query 9", "passage 9"))
    with pytest.raises(KindBuildError, match=rf"\[rankers\.oa\]: grader URL .* is unreachable.*; 1 of the 10 "
                                             r"judgments of score oa window test are not stored, and nothing was sent"):
        Evaluation(settings, load_profile(str(profile))).text_scores("test", "oa", "window")
