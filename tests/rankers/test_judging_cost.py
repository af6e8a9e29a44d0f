"""Honest long judging (docs/protocol.md#judging-cost): a heartbeat while a slow server call is in flight, every
finished judgment committed as it finishes (Ctrl-C loses none), and the plan printed before a stage judges, with
``--max-judge-minutes`` stopping an over-budget stage. Every judge kind through a loopback chat server that holds its
answers until the test releases them (events, never sleeps)."""
from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import threading

import pandas as pd
import pytest

from fixtures import progress
from fixtures.settings import PROJECT_ROOT
from rankers.kinds.base import JudgePlan
from tests.support import judging_run
from tests.support.chat_server import chat_reply, chat_server
from tests.support.score_cache import rows_in_live_cache

KINDS = ("llm_grader", "llm_listwise", "llm_pairwise")
#: How long a test waits for an event before it fails (never a synchronization: the event ends the wait).
LIMIT_S = 120.0


def _answer(body: dict) -> dict:
    """A reply every judge reads: a grade, a permutation, a letter."""
    user = body["messages"][-1]["content"]
    if "[1]" in user:
        return chat_reply("[1] > [2] > [3]")
    return chat_reply("A" if 'id="A"' in user else "3")


class _Lines(io.StringIO):
    """A progress stream that sets ``seen`` once a line matching ``pattern`` is written."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern, self.seen = re.compile(pattern), threading.Event()

    def write(self, text: str) -> int:
        if self.pattern.search(text):
            self.seen.set()
        return super().write(text)


@pytest.mark.parametrize("kind", KINDS)
def test_a_heartbeat_names_stage_progress_and_the_oldest_wait_while_a_call_is_held(kind, tmp_path):
    release = threading.Event()

    def held(body: dict) -> dict:
        release.wait(LIMIT_S)
        return _answer(body)

    lines = _Lines(r"score judge window test: 0/\d+ \w+ .*in flight, oldest waiting")
    progress.configure(lines, interval_s=0.05)
    try:
        with chat_server(held) as (url, bodies):
            worker = threading.Thread(target=judging_run.judge, args=(kind, url, tmp_path))
            worker.start()
            try:
                assert lines.seen.wait(LIMIT_S), lines.getvalue()  # written while every answer is held
            finally:
                release.set()
                worker.join(LIMIT_S)
    finally:
        progress.configure(None)
    heartbeat = next(line for line in lines.getvalue().splitlines() if "oldest waiting" in line)
    assert re.search(r"0/(4|8|12) (inputs|judgments) \(0%\)", heartbeat), heartbeat
    assert re.search(r"2 requests in flight", heartbeat), heartbeat  # concurrency 2: both slots held



@pytest.mark.parametrize("kind", KINDS)
def test_ctrl_c_keeps_every_finished_judgment_and_the_rerun_reads_them(kind, tmp_path):
    answered, gate, release = [], threading.Lock(), threading.Event()

    def first_two(body: dict) -> dict:  # answers two requests at once, holds every later one
        with gate:
            answered.append(body)
            mine = len(answered)
        if mine > 2:
            release.wait(LIMIT_S)
        return _answer(body)

    cache = tmp_path / "cache"
    with chat_server(first_two) as (url, _):
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.judging_run", kind, url, str(cache)],
                                cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            # The event: two judgments in the cache while the rest of the call is held (one call, one chunk).
            while rows_in_live_cache(cache, available_only=True) < 2 and proc.poll() is None:
                threading.Event().wait(0.01)
            assert rows_in_live_cache(cache, available_only=True) == 2, proc.communicate(timeout=LIMIT_S)[0][-3000:]
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=LIMIT_S)
        finally:
            release.set()
    assert proc.returncode != 0 and "KeyboardInterrupt" in out, out[-3000:]
    assert rows_in_live_cache(cache, available_only=True) == 2
    with chat_server(_answer) as (url, bodies):
        again = judging_run.judge(kind, url, cache)
    total = again.n_unique
    assert len(bodies) == total - 2 and again.n_scored == total - 2  # the two finished ones came from the cache


def test_the_plan_counts_cache_hits_and_misses_and_reads_the_judges_history(tmp_path):
    with chat_server(_answer) as (url, _):
        decl = judging_run.declaration("llm_listwise", url)
        ctx = judging_run.context(tmp_path)
        rows = judging_run.inputs()
        cold = decl.ranker_kind.plan(decl, ctx, rows)
        assert (cold.judgments, cold.cached, cold.seconds_per_judgment, cold.history) == (4, 0, None, 0)
        # The texts of four windows of three passages, at 4 characters a token.
        chars = sum(len(q) for q in {r[2] for r in rows}) + sum(len(r[3]) for r in rows)
        assert cold.prompt_tokens == chars // 4
        cold.probe()  # three judgments timed and committed
        warm = decl.ranker_kind.plan(decl, ctx, rows)
    assert (warm.judgments, warm.cached, warm.to_judge, warm.history) == (4, 3, 1, 3)
    assert warm.seconds_per_judgment is not None and warm.estimate_s == pytest.approx(warm.seconds_per_judgment)


def test_a_plan_reads_as_one_line_and_estimates_from_its_rate():
    plan = JudgePlan(judgments=52, cached=12, prompt_tokens=96_000, seconds_per_judgment=30.0, history=12)
    assert plan.to_judge == 40 and plan.estimate_s == 1200.0
    assert plan.line("score lw window test") == ("plan score lw window test: 52 judgments (40 to judge, 12 cached), "
                                                 "~96,000 prompt tokens, about 20.0 min (30 s a judgment, median "
                                                 "of 12 stored)")
    assert JudgePlan(4, 4, 0, None, 0).estimate_s == 0.0
    assert JudgePlan(4, 0, 10, None, 0).line("x").endswith("time unknown (no stored judgment of this judge yet)")


def test_cost_rows_measure_the_wall_clock_apart_from_the_summed_request_seconds():
    """Four requests of 2 s each, two in flight: 4 s of wall-clock (the stored shares), 8 s of requests."""
    from reports.cost import stage_cost

    frame = pd.DataFrame({"qid": ["a"] * 4, "pid": ["p1", "p2", "p3", "p4"], "score": [1.0] * 4})
    calls = pd.DataFrame({"key": ["k1", "k2", "k3", "k4"], "available": [True] * 4, "input_tokens": [10.0] * 4,
                          "output_tokens": [1.0] * 4, "latency_s": [2.0] * 4,
                          "usage": [{"latency_s": 2.0, "wall_s": s} for s in (2.0, 0.0, 2.0, 0.0)]})
    row = stage_cost("lw_window", frame, calls)
    assert (row["wall_s"], row["request_s"], row["wall_s_per_judgment"]) == (4.0, 8.0, 1.0)
    frame["usage"] = [{"latency_s": 2.0, "wall_s": s} for s in (2.0, 0.0, 2.0, 0.0)]
    row = stage_cost("g_window", frame)
    assert (row["wall_s"], row["request_s"]) == (4.0, 8.0)


def test_a_failed_listwise_window_counts_one_unavailable_judgment_not_its_passages(tmp_path):
    first = judging_run.inputs()[0][0]

    def answer(body: dict) -> dict:
        user = body["messages"][-1]["content"]
        return chat_reply("I cannot rank these." if f"query of {first}" in user else "[2] > [1] > [3]")

    from rankers.scorers.cache import unavailable_causes

    with chat_server(answer) as (url, _):
        scored = judging_run.judge("llm_listwise", url, tmp_path)
    assert int(scored.frame["score"].isna().sum()) == judging_run.PASSAGES  # the window's passage rows fall back
    assert scored.n_unavailable == 1 and scored.n_unique == judging_run.WINDOWS
    # its cause is stored where the reply was read, not recovered from the reason's text
    assert unavailable_causes(scored.judged) == {"no identifier in range": 1}


def test_max_judge_minutes_stops_an_over_budget_stage_before_it_judges(tmp_path):
    """No history: three judgments are timed (and kept), then the estimate for the rest exceeds the limit."""
    from types import SimpleNamespace

    from fixtures.settings import Settings
    from harness.judging import OverBudget
    from harness.session import Evaluation

    buffer = io.StringIO()
    progress.configure(buffer)
    try:
        with chat_server(_answer) as (url, bodies):
            decl = judging_run.declaration("llm_grader", url)
            session = SimpleNamespace(settings=Settings(max_judge_minutes=1e-9), context=judging_run.context(tmp_path),
                                      where=lambda d: judging_run.WHERE, _declared=lambda d, what, compute: compute())
            with pytest.raises(OverBudget) as stopped:
                Evaluation._within_budget(session, decl, judging_run.inputs(), "score judge window test")
    finally:
        progress.configure(None)
    message = str(stopped.value)
    assert message.startswith(f"{judging_run.WHERE}: score judge window test is estimated at ")
    assert "(9 judgments at " in message and "over --max-judge-minutes 1e-09: stopped before judging" in message
    assert len(bodies) == 3  # the timed calls only, nothing else was judged
    printed = buffer.getvalue()
    assert "timing a few before the estimate" in printed
    assert "plan score judge window test: 12 judgments (9 to judge, 3 cached), ~" in printed
