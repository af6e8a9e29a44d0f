"""Model keys are built from declared parts, and they are the keys the stored judgments were filed under."""
from __future__ import annotations

from rankers.scorers.base import DeclaredKey
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from rankers.scorers.llm.vllm_backend import VLLMBackend
from rankers.scorers.rerank_api import RerankAPIScorer

SETTINGS = '{"logprobs":20,"max_tokens":6144,"seed":0,"temperature":0.0,"thinking":null}'


def test_a_key_joins_its_declared_parts_in_order() -> None:
    class Judge(DeclaredKey):
        def key_parts(self) -> dict[str, str]:
            return {"judge": "mine", "model": "m@r", "version": "v2"}

    assert Judge().model_key == "mine|m@r|v2"


def test_engine_and_scorer_keys_are_unchanged_by_their_declared_parts() -> None:
    # Hand-written: the keys these objects had when they were joined by hand (stored judgments are filed under them).
    assert OpenAIBackend("http://127.0.0.1:9/v1", "m", revision="r1").model_key == \
        f"openai:m@r1|{SETTINGS}|cut=chars4|escape=ctl2"
    assert OpenAIBackend("http://127.0.0.1:9/v1", "m", extra_body={"top_k": 3}).model_key == \
        f'openai:m@unpinned|{SETTINGS}|{{"top_k":3}}|cut=chars4|escape=ctl2'
    assert VLLMBackend("Qwen/Q", revision="abc", max_model_len=4096).model_key == \
        ('vllm:Qwen/Q@abc|{"logprobs":20,"max_tokens":6144,"seed":0,"temperature":0.0,"thinking":true}'
         "|max_model_len=4096|cut=tokens|escape=ctl2")
    assert RerankAPIScorer("http://127.0.0.1:9", "m", api="tei", extra_body={"truncate": True}).model_key == \
        'rerank_api|tei|m@unpinned|{"truncate":true}|escape=ctl2'
