"""Several endpoints behind one server-backed scorer (``docs/protocol.md#endpoints``): least outstanding work within
a per-endpoint bound, an endpoint that stops answering taken out with its requests in flight sent again elsewhere
(each answered and stored once), the last endpoint never taken out, url lists checked, and what the run reports.

The endpoints are an async mock transport; a dying endpoint holds its requests on an asyncio event that the other
endpoints set after a given number of answers, then drops them: no timing decides anything.
"""
from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler

import httpx
import pandas as pd
import pytest

from fixtures.identity import text_digest as text_hash
from rankers.kinds.base import DeclarationError
from rankers.declarations import parse_declaration
from rankers.scorers.cache import ScoreCache, endpoint_summary
from rankers.scorers.grader import LLMGrader
from rankers.scorers.http import base_urls
from rankers.scorers.llm.generation import GenerationSettings
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from rankers.scorers.pointwise import score_with_cache
from rankers.scorers.rerank_api import RerankAPIScorer
from reports.render import endpoint_lines
from tests.support.loopback import serve_in_thread, stop_thread_server

A, B, C = "http://127.0.0.1:8101/v1", "http://127.0.0.1:8102/v1", "http://127.0.0.1:8103/v1"
SETTINGS = GenerationSettings(thinking=False, logprobs=0, concurrency=2, timeout_s=30)


def _base(request: httpx.Request) -> str:
    return f"http://{request.url.host}:{request.url.port}/v1"


def _grade_of(body: dict) -> str:
    """The answer every healthy endpoint gives: the passage's number mod 5 (so scores show which input they are)."""
    return str(int(body["messages"][1]["content"].split("passage ")[1].split()[0].strip("<>/")) % 5)


def _reply(body: dict) -> httpx.Response:
    return httpx.Response(200, json={"model": body["model"], "choices": [
        {"message": {"role": "assistant", "content": _grade_of(body)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 1}})


def _inputs(n: int) -> list[tuple[str, str, str, str]]:
    return [(f"q{i % 3}", f"p{i}", f"query {i % 3}", f"passage {i}") for i in range(n)]


def _grader(urls, handler) -> LLMGrader:
    return LLMGrader(OpenAIBackend(urls, "m", settings=SETTINGS, transport=httpx.MockTransport(handler)))


def test_requests_are_spread_by_least_outstanding_work_within_the_per_endpoint_bound():
    inflight = dict.fromkeys((A, B, C), 0)
    most = dict.fromkeys((A, B, C), 0)
    served = dict.fromkeys((A, B, C), 0)
    full = asyncio.Event()  # every slot of every endpoint holds a request

    async def handler(request: httpx.Request) -> httpx.Response:
        url = _base(request)
        inflight[url] += 1
        most[url] = max(most[url], inflight[url])
        if sum(inflight.values()) == 3 * SETTINGS.concurrency:
            full.set()
        await full.wait()
        inflight[url] -= 1
        served[url] += 1
        return _reply(json.loads(request.content))

    grader = _grader([A, B, C], handler)
    batch = grader.score([(q, p) for _, _, q, p in _inputs(12)])
    assert full.is_set() and most == dict.fromkeys((A, B, C), SETTINGS.concurrency)  # the bound, on each
    assert sum(served.values()) == 12 and all(n > 0 for n in served.values())
    assert {u["endpoint"] for u in batch.usage} == {A, B, C} and grader.backend.pool.removed == {}


def test_an_endpoint_that_stops_answering_is_taken_out_and_its_requests_in_flight_go_elsewhere(tmp_path):
    answered = {A: 0, B: 0}
    others_answered = asyncio.Event()
    held_at_c = []

    async def handler(request: httpx.Request) -> httpx.Response:
        url = _base(request)
        if url == C:
            if others_answered.is_set():  # dead: nothing listens any more
                raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
            held_at_c.append(request)
            await others_answered.wait()  # it dies with these requests in flight
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        await asyncio.sleep(0)  # a yield, as a real reply's I/O is: other requests get dispatched meanwhile
        answered[url] += 1
        if sum(answered.values()) == 4:
            others_answered.set()
        return _reply(json.loads(request.content))

    inputs = _inputs(20)
    with ScoreCache(tmp_path / "scores.sqlite") as cache:
        grader = _grader([C, A, B], handler)  # C first: the first requests go to it
        scored = score_with_cache(grader, inputs, cache, progress=False)
        stored, _ = cache.lookup([(grader.model_key, text_hash(q), p, text_hash(t)) for _, p, q, t in inputs])
    with ScoreCache(tmp_path / "one.sqlite") as cache:
        single = score_with_cache(_grader(A, lambda r: _reply(json.loads(r.content))), inputs, cache, progress=False)
    assert held_at_c and set(grader.backend.pool.removed) == {C}
    assert "RemoteProtocolError" in grader.backend.pool.removed[C]
    assert scored.n_unavailable == 0 and scored.scores == single.scores  # the endpoint never changes a score
    assert sum(answered.values()) == len(inputs)  # each request answered once: none counted twice
    assert len(stored) == len(inputs)  # and stored once
    usage = scored.frame["usage"]
    assert {u["endpoint"] for u in usage} == {A, B}  # never the dead one
    resent = [u for u in usage if "resent_from" in u]
    assert len(resent) == len(held_at_c) and all(set(u["resent_from"]) == {C} for u in resent)
    summary = endpoint_summary(usage, scored.frame["cached"])
    assert summary[C]["judgments"] == 0 and summary[C]["resent"] == len(held_at_c)
    assert "RemoteProtocolError" in str(summary[C]["taken_out"])
    assert summary[A]["judgments"] + summary[B]["judgments"] == len(inputs)
    assert endpoint_summary(usage, [True] * len(usage)) == {}  # a warm run names no endpoint it did not contact


def test_the_last_endpoint_in_is_never_taken_out():
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    one = _grader(A, refused)
    batch = one.score([("q", "passage 1"), ("q", "passage 2")])
    assert all("ConnectError" in e for e in batch.errors) and one.backend.pool.removed == {}
    two = _grader([A, B], refused)
    batch = two.score([(q, p) for _, _, q, p in _inputs(6)])
    assert all("ConnectError" in e for e in batch.errors) and len(two.backend.pool.removed) == 1
    assert all(len(u.get("resent_from", {})) <= 1 for u in batch.usage)


def test_an_endpoint_answering_with_an_http_error_stays_in():
    def handler(request: httpx.Request) -> httpx.Response:
        if _base(request) == A:
            return httpx.Response(500, text="boom")
        return _reply(json.loads(request.content))

    grader = _grader([A, B], handler)
    batch = grader.score([(q, p) for _, _, q, p in _inputs(8)])
    assert grader.backend.pool.removed == {}  # an answer, if a bad one: recorded per input, the endpoint stays
    assert any(e and "HTTP 500" in e for e in batch.errors)


def test_rerank_api_spreads_over_a_url_list_and_takes_a_dead_endpoint_out():
    base_a, base_b = "http://127.0.0.1:8201", "http://127.0.0.1:8202"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.port == 8201:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        docs = json.loads(request.content)["documents"]
        return httpx.Response(200, json={"results": [{"index": i, "relevance_score": float(len(d))}
                                                     for i, d in enumerate(docs)]})

    scorer = RerankAPIScorer([base_a, base_b], "m", concurrency=2, batch_size=2, transport=httpx.MockTransport(handler))
    batch = scorer.score([(f"q{i % 2}", "x" * i) for i in range(1, 9)])
    assert list(batch.scores) == [float(i) for i in range(1, 9)]
    assert set(scorer.pool.removed) == {base_a} and {u["endpoint"] for u in batch.usage} == {base_b}


@pytest.mark.parametrize("url, message", [([], "empty"), ([A, A], "more than once"), ([A, "ftp://x"], "scheme"),
                                          ([A, 3], "empty|not an http")])
def test_url_lists_are_checked(url, message):
    with pytest.raises(ValueError, match=message):
        base_urls(url, "grader")


def test_a_declaration_with_a_bad_url_in_its_list_is_refused_naming_it():
    table = {"kind": "llm_grader", "backend": "openai", "model": "m", "url": [A, "http://127.0.0.1:0/v1"]}
    with pytest.raises(DeclarationError, match="invalid port"):
        parse_declaration("g", table, "p.toml [rankers.g]")
    decl = parse_declaration("g", {**table, "url": [A, B]}, "p.toml [rankers.g]")
    assert decl.options["url"] == [A, B]


def test_the_report_names_each_endpoint_and_the_one_taken_out():
    frame = pd.DataFrame([{"ranker": "g", "scope": "window", "endpoint": A, "judgments": 30, "resent": 0,
                           "taken_out": None},
                          {"ranker": "g", "scope": "window", "endpoint": C, "judgments": 2, "resent": 3,
                           "taken_out": "RemoteProtocolError: Server disconnected"}])
    (line,) = endpoint_lines(frame)
    assert line.startswith("g (window): 32 judgments made now — 30 " + A)
    assert f"**taken out**: {C} (3 requests re-sent: RemoteProtocolError: Server disconnected)" in line


def _keep_alive_server(close_after_each: bool):
    """HTTP/1.1 with keep-alive; with ``close_after_each`` it closes every connection after answering without
    saying so (as a server does with an idle connection): the client's next request on it finds it gone."""
    connections = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            connections.append(self.client_address)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(_reply(body).json()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = close_after_each

        def log_message(self, *args: object) -> None:
            pass

    return serve_in_thread(Handler), connections


@pytest.mark.parametrize("close_after_each", [False, True])
def test_the_keep_alive_transport_reuses_its_connection_and_reopens_one_closed_while_idle(close_after_each):
    server, connections = _keep_alive_server(close_after_each)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        grader = LLMGrader(OpenAIBackend(url, "m", settings=GenerationSettings(thinking=False, logprobs=0,
                                                                               concurrency=1)))
        batch = grader.score([(q, p) for _, _, q, p in _inputs(5)])
    finally:
        stop_thread_server(server)
    assert batch.errors == [None] * 5 and list(batch.scores) == [float(i % 5) for i in range(5)]
    assert len(connections) == (5 if close_after_each else 1)  # one slot, one connection while the server keeps it


def test_extra_body_is_a_server_option_sent_with_every_request_and_part_of_the_key():
    table = {"kind": "llm_grader", "backend": "llamacpp", "model": "builtin:smollm2-135m-instruct",
             "extra_body": {"grammar": "root ::= [0-4]"}}
    with pytest.raises(DeclarationError, match="extra_body"):
        parse_declaration("g", table, "p.toml [rankers.g]")
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return _reply(bodies[-1])

    plain = LLMGrader(OpenAIBackend(A, "m", settings=SETTINGS))
    grammar = LLMGrader(OpenAIBackend(A, "m", settings=SETTINGS, extra_body={"grammar": "root ::= [0-4]"},
                                      transport=httpx.MockTransport(handler)))
    grammar.score([("q", "passage 3")])
    assert bodies[0]["grammar"] == "root ::= [0-4]" and grammar.model_key != plain.model_key


@pytest.mark.parametrize("kind", ["llm_listwise", "llm_pairwise"])
def test_a_multi_passage_judge_takes_extra_body_for_a_server_only(kind: str) -> None:
    """A listwise or pairwise judge's replies can be constrained the way the grader's are (a llama.cpp grammar)."""
    grammar = {"grammar": 'root ::= "[" [12] "] > [" [12] "]"'}
    with pytest.raises(DeclarationError, match="'extra_body' applies to backend 'openai' only"):
        parse_declaration("j", {"kind": kind, "backend": "llamacpp", "model": "builtin:smollm2-135m-instruct",
                                "extra_body": grammar}, "p.toml [rankers.j]")
    decl = parse_declaration("j", {"kind": kind, "backend": "openai", "url": A, "model": "m", "extra_body": grammar},
                             "p.toml [rankers.j]")
    backend = decl.ranker_kind.backend(decl, None)
    body = backend.payload([{"role": "user", "content": "rank"}])
    assert body["grammar"] == grammar["grammar"]
    plain = parse_declaration("j", {"kind": kind, "backend": "openai", "url": A, "model": "m"}, "p.toml [rankers.j]")
    assert plain.ranker_kind.backend(plain, None).model_key != backend.model_key
