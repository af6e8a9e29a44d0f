"""The listwise and pairwise kinds: declarations and their checks, requirements, keys, and judging through an
OpenAI-compatible server on 127.0.0.1 (the contract only: the same declaration with ``backend = "llamacpp"``
runs in-process, ``tests/harness/test_end_to_end_llm_judges.py``)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.profile import load_profile
from harness.profile_records import ProfileError
from rankers.kinds import kind
from rankers.kinds.base import Context, RankerDecl
from rankers.declarations import DeclarationError, parse_declaration
from tests.support.chat_server import chat_reply, chat_server

WHERE = "mine.toml [rankers.x]"


def _decl(**table) -> RankerDecl:
    return parse_declaration("x", table, WHERE)


@pytest.mark.parametrize("table, message", [
    ({"kind": "llm_listwise", "backend": "ollama", "model": "m"}, "backend must be one of"),
    ({"kind": "llm_listwise", "backend": "openai", "model": "m"}, "needs 'url'"),
    ({"kind": "llm_listwise", "backend": "llamacpp", "model": "m", "window": 21}, "window must be at least 1 and at "
                                                                                  "most 20"),
    ({"kind": "llm_listwise", "backend": "llamacpp", "model": "m", "sub_window": 10, "step": 11}, "step must be"),
    ({"kind": "llm_listwise", "backend": "llamacpp", "model": "m", "order_check": -1}, "order_check"),
    ({"kind": "llm_listwise", "backend": "rerankers", "model": "gpt-4o"}, "needs model_type"),
    ({"kind": "llm_listwise", "backend": "llamacpp", "model": "m", "model_type": "rankgpt"}, "backend 'rerankers'"),
    ({"kind": "llm_pairwise", "backend": "llamacpp", "model": "m", "algorithm": "heapsort"}, "algorithm must be"),
    ({"kind": "llm_pairwise", "backend": "llamacpp", "model": "m", "passes": 2}, "passes applies"),
    ({"kind": "llm_pairwise", "backend": "llamacpp", "model": "m", "order_check": 2}, "unknown key 'order_check'"),
    ({"kind": "llm_pairwise", "backend": "llamacpp"}, "needs 'model'"),
])
def test_bad_declarations_fail_naming_the_table_and_the_key(table, message):
    with pytest.raises(DeclarationError, match=re.escape(WHERE) + ".*" + re.escape(message)):
        _decl(**table)


def test_good_declarations_are_window_rankers_with_their_kinds_requirements():
    lw = _decl(kind="llm_listwise", backend="llamacpp", model="builtin:smollm2-135m-instruct", window=5,
               sub_window=3, step=2, order_check=2)
    pw = _decl(kind="llm_pairwise", backend="openai", url="http://127.0.0.1:8000/v1", model="m", mode="designated")
    assert lw.is_window and pw.designated_only and lw.reference == "fusion" and lw.max_score is None
    assert [r.what for r in lw.requirements()] == ["llama-cpp-python"] and pw.requirements() == ()
    rr = _decl(kind="llm_listwise", backend="rerankers", model="gpt-4o", model_type="rankgpt")
    assert [r.what for r in rr.requirements()] == ["the rerankers package", "litellm (rerankers' RankGPT client)"]
    vl = _decl(kind="llm_pairwise", backend="vllm", model="Qwen/Qwen3-14B-AWQ", algorithm="sliding", passes=3)
    assert [r.what for r in vl.requirements()] == ["vllm", "a CUDA device"]


def test_a_profile_declares_both_kinds_beside_the_embedded_rankers(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    '[rankers.lw]\nkind = "llm_listwise"\nbackend = "llamacpp"\nmodel = "builtin:smollm2-135m-instruct"\n'
                    'window = 5\n[rankers.pw]\nkind = "llm_pairwise"\nbackend = "llamacpp"\n'
                    'model = "builtin:smollm2-135m-instruct"\nmode = "designated"\n', encoding="utf-8")
    profile = load_profile(str(path))
    assert profile.rankers["lw"].ranker_kind is kind("llm_listwise") and profile.rankers["pw"].designated_only
    path.write_text(path.read_text() + 'sub_window = 3\n', encoding="utf-8")
    with pytest.raises(ProfileError, match=r"\[rankers.pw\]: unknown key 'sub_window'"):
        load_profile(str(path))


class _Ranking:
    def __init__(self, frame):
        self.frame = frame


def _context(tmp_path: Path, reference_ranks: dict[tuple[str, str], int]) -> Context:
    """A hand-built context: the data and the reference's ranks are all these kinds read."""
    import pandas as pd

    from fixtures.study import build_study

    study = build_study()
    frame = pd.DataFrame([{"qid": q, "pid": p, "rank": r} for (q, p), r in reference_ranks.items()])
    shared: dict = {}

    def unused(*args, **kwargs):
        raise AssertionError("the kind read something it should not need")

    return Context(study=study, pool=unused, pool_digest=unused, population=unused, queries=unused,
                   ranking=lambda split, name: _Ranking(frame), ranking_key=unused, resolve_path=unused,
                   cache=lambda *parts: tmp_path.joinpath(*parts), shared=lambda k, b: shared.setdefault(k, b()),
                   memo=unused, forget=unused, stage=unused, where=lambda d: WHERE, seed=0, subset=True)


def _listwise_answer(body: dict) -> dict:
    """A server that ranks by how many query words a passage contains (ties: input order)."""
    user = body["messages"][1]["content"]
    query = set(re.search(r"<query>\n(.*?)\n</query>", user, re.S).group(1).lower().split())
    passages = re.findall(r"\[(\d+)\] <passage id=\"\d+\">\n(.*?)\n</passage>", user, re.S)
    ranked = sorted(passages, key=lambda p: (-len(query & set(p[1].lower().split())), int(p[0])))
    return chat_reply(" > ".join(f"[{i}]" for i, _ in ranked), prompt_tokens=len(user) // 4, completion_tokens=12)


def test_listwise_kind_through_an_openai_compatible_server(tmp_path):
    qid = "1000-2_q1"  # a Test direction: the kind finds its split from the data
    inputs = [(qid, "p1", "river bank flood", "a text about deserts"),
              (qid, "p2", "river bank flood", "the river bank was hit by a flood"),
              (qid, "p3", "river bank flood", "a bank account")]
    ranks = {(qid, "p1"): 1, (qid, "p2"): 2, (qid, "p3"): 3}
    with chat_server(_listwise_answer) as (url, bodies):
        decl = _decl(kind="llm_listwise", backend="openai", url=url, model="m", thinking=False, order_check=1)
        scored = decl.ranker_kind.judge(decl, _context(tmp_path, ranks), inputs, desc="test")
        again = decl.ranker_kind.judge(decl, _context(tmp_path, ranks), inputs, desc="test")
    assert scored.scores == {(qid, "p2"): -1.0, (qid, "p3"): -2.0, (qid, "p1"): -3.0}
    assert len(bodies) == 2, "the window and its reversed presentation (order_check = 1); the rerun reads the cache"
    assert again.n_scored == 0 and again.scores == scored.scores
    # The two requests go out concurrently: find each by its first passage, not by arrival order.
    first = {re.search(r'\[1\] <passage id="1">\n(.*?)\n', b["messages"][1]["content"]).group(1): b for b in bodies}
    assert sorted(first) == ["a bank account", "a text about deserts"]  # reference order, and reversed
    sent = first["a text about deserts"]
    assert sent["max_tokens"] == 6 * 20 + 8 and sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert list(scored.windows["variant"]) == ["main", "reversed"] and scored.calls["input_tokens"].notna().all()


def test_pairwise_kind_reads_a_servers_letters_and_their_probabilities(tmp_path):
    import math

    qid = "1000-2_q1"
    inputs = [(qid, "pref", "q", "preferred passage"), (qid, "counter", "q", "counterpart passage")]

    def answer(body):
        user = body["messages"][1]["content"]
        first = re.search(r'<passage id="A">\n(.*?)\n</passage>', user, re.S).group(1)
        letter = "A" if first.startswith("preferred") else "B"
        other = "B" if letter == "A" else "A"
        top = [{"token": letter, "logprob": math.log(0.8)}, {"token": other, "logprob": math.log(0.2)}]
        return chat_reply(letter, logprobs=[{"token": letter, "logprob": math.log(0.8), "top_logprobs": top}])

    with chat_server(answer) as (url, bodies):
        # One request at a time, so bodies arrive in the order the judge asks (both orders are asked).
        decl = _decl(kind="llm_pairwise", backend="openai", url=url, model="m", thinking=False, mode="designated",
                     concurrency=1)
        scored = decl.ranker_kind.judge(decl, _context(tmp_path, {(qid, "pref"): 7, (qid, "counter"): 3}), inputs, "t")
    assert scored.scores == {(qid, "pref"): 1.0, (qid, "counter"): 0.0}
    # Shown in the reference's order, never preferred first: the counterpart (rank 3) is passage A first.
    first_sent = re.search(r'<passage id="A">\n(.*?)\n', bodies[0]["messages"][1]["content"]).group(1)
    assert first_sent == "counterpart passage" and bodies[0]["max_tokens"] == 8
    probs = [u["choice_probs"] for u in scored.calls["usage"]]
    assert probs == [pytest.approx([0.2, 0.8]), pytest.approx([0.8, 0.2])]
    assert json.dumps(list(scored.calls["result"])) == "[1, 0]"
