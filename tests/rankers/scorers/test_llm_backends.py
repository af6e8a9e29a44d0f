"""Grader backends: the OpenAI-compatible client (mock transport, dead and stuck servers, a real
llama.cpp server with a mid-run fault), vLLM's call shape, and llama.cpp's prefix ordering."""
from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
import types

import httpx
import numpy as np
import pandas as pd
import pytest

from rankers.scorers.grader import LLMGrader
from rankers.scorers.llm_backends import (BackendUnavailable, LlamaCppBackend, LLMBackend, OpenAIBackend,
                                          VLLMBackend, make_backend)
from rankers.scorers.prompts import load_prompt

PROMPT = load_prompt("grade_v1")


def _chat(content, prompt_tokens=100, completion_tokens=1, **message):
    return {"choices": [{"message": {"role": "assistant", "content": content, **message}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def _messages(n: int, query: str = "q") -> list[list[dict[str, str]]]:
    return [PROMPT.render(query, f"passage {i}") for i in range(n)]


# ----------------------------------------------------------------------------- openai (mock transport)


def test_openai_backend_sends_greedy_requests_and_records_usage():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, request.headers["authorization"], body))
        passage_no = body["messages"][1]["content"].split("passage ")[1][0]
        return httpx.Response(200, json=_chat(passage_no, prompt_tokens=90 + int(passage_no)))

    backend = OpenAIBackend("http://llm.test/v1/", "Qwen/Qwen3-14B-AWQ", max_tokens=6144, api_key="k",
                            extra_body={"chat_template_kwargs": {"enable_thinking": True}},
                            transport=httpx.MockTransport(handler))
    assert isinstance(backend, LLMBackend)
    out = backend.generate(_messages(3))
    assert [g.text for g in out] == ["0", "1", "2"]  # aligned with the inputs
    assert [g.input_tokens for g in out] == [90, 91, 92] and all(g.output_tokens == 1 for g in out)
    assert all(g.error is None and g.latency_s >= 0 for g in out)
    path, auth, body = seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    assert body["model"] == "Qwen/Qwen3-14B-AWQ" and body["temperature"] == 0.0 and body["max_tokens"] == 6144
    assert body["seed"] == 0 and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_openai_concurrency_is_bounded():
    state = {"now": 0, "peak": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return httpx.Response(200, json=_chat("4"))

    backend = OpenAIBackend("http://llm.test/v1", "m", concurrency=3, transport=httpx.MockTransport(handler))
    out = backend.generate(_messages(10))
    assert all(g.text == "4" for g in out)
    assert state["peak"] == 3


def test_openai_retries_are_off_by_default_and_configurable():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(200, json=_chat("3")) if calls["n"] % 3 == 0 else httpx.Response(503, text="busy")

    out = OpenAIBackend("http://llm.test/v1", "m", transport=httpx.MockTransport(handler)).generate(_messages(1))
    assert calls["n"] == 1 and out[0].text is None and out[0].error == "HTTP 503: busy"
    calls["n"] = 0
    out = OpenAIBackend("http://llm.test/v1", "m", retries=2, transport=httpx.MockTransport(handler)).generate(_messages(1))
    assert calls["n"] == 3 and out[0].text == "3" and out[0].error is None


def test_openai_timeout_bounds_a_stuck_request():
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json=_chat("4"))

    backend = OpenAIBackend("http://llm.test/v1", "m", timeout_s=0.2, concurrency=2, transport=httpx.MockTransport(handler))
    start = time.perf_counter()
    out = backend.generate(_messages(2))
    assert time.perf_counter() - start < 5
    assert [g.error for g in out] == ["timeout after 0.2s"] * 2


def test_openai_rewraps_separate_reasoning_so_the_parser_sees_it():
    replies = iter([_chat("3", reasoning_content="negation holds"), _chat(None, reasoning_content="still thinking"),
                    {"choices": [{"message": {"content": None}, "finish_reason": "length"}]}])
    backend = OpenAIBackend("http://llm.test/v1", "m", concurrency=1,
                            transport=httpx.MockTransport(lambda r: httpx.Response(200, json=next(replies))))
    grader = LLMGrader(backend)
    batch = grader.score([("q", "a"), ("q", "b"), ("q", "c")])
    assert batch.raw[:2] == ["<think>negation holds</think>3", "<think>still thinking"]
    np.testing.assert_array_equal(batch.scores, [3.0, np.nan, np.nan])
    assert batch.errors[1] == "parse: unterminated <think> block"
    assert batch.errors[2] == "backend: no message content (finish_reason=length)"


def test_openai_malformed_json_is_an_error_not_a_crash():
    backend = OpenAIBackend("http://llm.test/v1", "m",
                            transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"oops": []})))
    out = backend.generate(_messages(1))
    assert out[0].text is None and out[0].error.startswith("KeyError")


def test_openai_works_when_called_inside_an_event_loop():
    backend = OpenAIBackend("http://llm.test/v1", "m", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=_chat("2"))))

    async def inside():
        return backend.generate(_messages(2))

    assert [g.text for g in asyncio.run(inside())] == ["2", "2"]


def test_openai_model_key_names_model_revision_and_settings_not_the_url():
    a = OpenAIBackend("http://a/v1", "Qwen/Qwen3-14B-AWQ", revision="abc123", max_tokens=6144)
    b = OpenAIBackend("http://b:9/v1", "Qwen/Qwen3-14B-AWQ", revision="abc123", max_tokens=6144)
    assert a.model_key == b.model_key
    assert a.model_key.startswith("openai:Qwen/Qwen3-14B-AWQ@abc123|")
    assert '"max_tokens":6144' in a.model_key and '"temperature":0.0' in a.model_key
    assert OpenAIBackend("http://a/v1", "Qwen/Qwen3-14B-AWQ", revision="abc123", max_tokens=16).model_key != a.model_key


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_dead_server_makes_every_input_unavailable():
    grader = LLMGrader(OpenAIBackend(f"http://127.0.0.1:{_closed_port()}/v1", "m", timeout_s=5))
    batch = grader.score([("q", "a"), ("q", "b"), ("r", "c")])
    assert np.isnan(batch.scores).all()
    assert all(e.startswith("backend: ConnectError") for e in batch.errors)


def test_openai_silent_server_times_out():
    with socket.socket() as listener:  # accepts connections (kernel backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        backend = OpenAIBackend(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", "m", timeout_s=0.5)
        start = time.perf_counter()
        out = backend.generate(_messages(2))
    assert time.perf_counter() - start < 5
    assert all(g.text is None and ("timeout" in g.error.lower() or "Timeout" in g.error) for g in out)


def test_make_backend_by_name():
    assert isinstance(make_backend("openai", base_url="http://x/v1", model="m"), OpenAIBackend)
    with pytest.raises(ValueError, match="unknown LLM backend 'tgi'"):
        make_backend("tgi")


# ----------------------------------------------------------------------------- vllm


def test_vllm_absent_raises_backend_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    backend = VLLMBackend()
    assert backend.model_key.startswith("vllm:Qwen/Qwen3-14B-AWQ@unpinned|")  # usable for cache look-ups on CPU
    with pytest.raises(BackendUnavailable, match="vllm"):
        backend.generate(_messages(1))


def test_vllm_backend_uses_the_paper_settings(monkeypatch):
    calls = {}

    class FakeLLM:
        def __init__(self, **kwargs):
            calls["llm"] = kwargs

        def chat(self, batch, sampling_params, use_tqdm, chat_template_kwargs):
            calls["chat"] = (len(batch), sampling_params, chat_template_kwargs)
            completion = types.SimpleNamespace(text="<think>ok</think>\n\n4", token_ids=[1, 2, 3])
            return [types.SimpleNamespace(prompt_token_ids=list(range(50)), outputs=[completion]) for _ in batch]

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    backend = VLLMBackend(revision="rev1")
    out = backend.generate(_messages(2))
    assert calls["llm"] == {"model": "Qwen/Qwen3-14B-AWQ", "max_model_len": 8192, "seed": 0, "revision": "rev1"}
    assert calls["chat"] == (2, {"temperature": 0.0, "max_tokens": 6144, "seed": 0}, {"enable_thinking": True})
    assert [(g.text, g.input_tokens, g.output_tokens) for g in out] == [("<think>ok</think>\n\n4", 50, 3)] * 2
    assert LLMGrader(backend).score([("q", "p")]).scores[0] == 4.0


def test_vllm_without_cuda_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendUnavailable, match="CUDA"):
        VLLMBackend().generate(_messages(1))


# ----------------------------------------------------------------------------- llama.cpp (no model needed)


class FakeLlama:
    """Records the order of calls and cache resets; answers with the passage number."""

    def __init__(self):
        self.calls: list[str] = []
        self.resets = 0

    def reset(self):
        self.resets += 1

    def create_chat_completion(self, messages, temperature, max_tokens, seed, stop):
        user = messages[1]["content"]
        self.calls.append(user)
        if "boom" in user:
            raise ValueError("Requested tokens (9000) exceed context window of 512")
        return {"choices": [{"message": {"content": user.split("passage-")[1][0]}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


def _llamacpp_with_fake(tmp_path, reuse_prefix: bool) -> tuple[LlamaCppBackend, FakeLlama]:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF fake")
    backend = LlamaCppBackend(model, n_ctx=512, reuse_prefix=reuse_prefix)
    fake = FakeLlama()
    backend._llm, backend._n_ctx = fake, 512
    return backend, fake


def test_llamacpp_groups_each_query_window_and_keeps_input_order(tmp_path):
    backend, fake = _llamacpp_with_fake(tmp_path, reuse_prefix=True)
    batch = [PROMPT.render(q, f"passage-{i}") for i, q in enumerate(["q-b", "q-a", "q-b", "q-a"])]
    out = backend.generate(batch)
    assert [g.text for g in out] == ["0", "1", "2", "3"]
    queries = [c.split("<query>\n")[1].split("\n")[0] for c in fake.calls]
    assert queries == ["q-a", "q-a", "q-b", "q-b"]  # consecutive calls share the system+query prefix
    assert fake.resets == 0


def test_llamacpp_without_reuse_resets_before_every_request(tmp_path):
    backend, fake = _llamacpp_with_fake(tmp_path, reuse_prefix=False)
    batch = [PROMPT.render(q, f"passage-{i}") for i, q in enumerate(["q-b", "q-a", "q-b"])]
    out = backend.generate(batch)
    assert [g.text for g in out] == ["0", "1", "2"]
    assert fake.resets == 3 and len(fake.calls) == 3


def test_llamacpp_request_error_is_per_input(tmp_path):
    backend, _ = _llamacpp_with_fake(tmp_path, reuse_prefix=True)
    out = backend.generate([PROMPT.render("q", "passage-1"), PROMPT.render("q", "boom passage-2")])
    assert out[0].text == "1" and out[1].text is None and "exceed context window" in out[1].error


def test_llamacpp_model_key_uses_the_file_digest(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF fake")
    key = LlamaCppBackend(model).model_key
    # sha256(b"GGUF fake"), first 16 hex digits, computed independently
    import hashlib
    assert key.startswith(f"llamacpp:m.gguf@sha256:{hashlib.sha256(b'GGUF fake').hexdigest()[:16]}|")
    base = LlamaCppBackend(model, revision="f" * 64, max_tokens=8).model_key
    assert base != LlamaCppBackend(model, revision="f" * 64, max_tokens=16).model_key
    assert base != LlamaCppBackend(model, revision="f" * 64, max_tokens=8, stop=["\n"]).model_key
    assert base == LlamaCppBackend(model, revision="f" * 64, max_tokens=8, reuse_prefix=False).model_key


def test_llamacpp_missing_model_is_unavailable(tmp_path):
    with pytest.raises(BackendUnavailable, match="not found"):
        LlamaCppBackend(tmp_path / "absent.gguf").model_key


# ----------------------------------------------------------------------------- real models (llama.cpp)


def _smollm2_path():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from fixtures.gguf import smollm2_gguf
    try:
        return smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.mark.llm
def test_llamacpp_smollm2_grades_deterministically_with_and_without_prefix_reuse():
    model = _smollm2_path()
    inputs = [("Which city is not the capital of France?", "Lyon is a large city in France."),
              ("Who wrote the novel?", "The novel was written by Jane Austen.")]
    messages = [PROMPT.render(q, p) for q, p in inputs]
    reuse = LlamaCppBackend(model.path, revision=model.sha256, n_threads=2)
    first = reuse.generate(messages)
    again = reuse.generate(messages)
    fresh = LlamaCppBackend(model.path, revision=model.sha256, n_threads=2, reuse_prefix=False).generate(messages)
    assert [g.text for g in first] == [g.text for g in again] == [g.text for g in fresh]
    assert all(g.error is None and g.input_tokens > 100 and 1 <= g.output_tokens <= 8 for g in first)


@pytest.fixture(scope="module")
def smollm2_server():
    model = _smollm2_path()
    from fixtures.llama_server import LlamaServer, ServerUnavailable, check_server_available
    try:
        check_server_available()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    server = LlamaServer(model.path, model="smollm2", n_ctx=1024, n_threads=2)
    server.start()
    yield server, model
    server.stop()
    server.log_path.unlink(missing_ok=True)


class StopServerAfter(httpx.AsyncBaseTransport):
    """Real HTTP transport that stops the server once ``n`` responses have come back."""

    def __init__(self, n: int, server) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.n = n
        self.server = server
        self.responses = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        self.responses += 1
        if self.responses == self.n:
            self.server.stop()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _inputs(n: int) -> list[tuple[str, str, str, str]]:
    """(qid, pid, query, passage) rows of two queries' windows."""
    return [(f"q{i // 3}", f"p{i}", f"Which film was not released in {1990 + i // 3}?",
             f"Film number {i} was released in {1990 + i % 4}.") for i in range(n)]


@pytest.mark.llm
def test_openai_backend_against_llama_server(smollm2_server):
    server, model = smollm2_server
    grader = LLMGrader(OpenAIBackend(server.base_url, "smollm2", revision=model.sha256, concurrency=2, timeout_s=60))
    batch = grader.score([(q, p) for _, _, q, p in _inputs(4)])
    assert all(r is not None for r in batch.raw)  # every request was answered
    assert all(e is None or e.startswith("parse:") for e in batch.errors)
    assert all(u["input_tokens"] > 100 and u["output_tokens"] >= 1 for u in batch.usage)


@pytest.mark.llm
def test_server_fault_mid_run_then_rescore_after_restart(smollm2_server, tmp_path):
    from rankers.scorers.cache import ScoreCache, score_with_cache

    server, model = smollm2_server
    inputs = _inputs(6)
    backend = OpenAIBackend(server.base_url, "smollm2", revision=model.sha256, concurrency=1, timeout_s=30,
                            transport=StopServerAfter(2, server))
    grader = LLMGrader(backend)
    with ScoreCache(tmp_path / "scores.sqlite") as cache:
        first = score_with_cache(grader, inputs, cache, batch_size=6, progress=False)
        errors = [None if pd.isna(e) else e for e in first.frame["error"]]
        transport_failures = [e for e in errors if e is not None and e.startswith("backend:")]
        assert len(transport_failures) == 4  # the server died after the 2nd answer: 4 affected inputs
        assert all(e is None or e.startswith("parse:") for e in errors[:2])
        assert first.n_unavailable >= 4

        server.start()  # same port
        backend.transport = None
        second = score_with_cache(grader, inputs, cache, batch_size=6, progress=False, retry_unavailable=True)
        assert second.n_scored == first.n_unavailable  # only the unavailable inputs were re-requested
        assert not any(isinstance(e, str) and e.startswith("backend:") for e in second.frame["error"])
        assert second.frame["raw"].notna().all()
