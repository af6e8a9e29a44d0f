"""Failure 8: server failures hid their cause. ConnectError, HTTP 500, JSONDecodeError or an unparseable answer
existed only in the SQLite cache; the run said only "gate fallback_pct_max (oa): measured 100, limit 0". The
OpenAI grader's URL was not checked up front, although the README lists an unreachable URL as a declaration error.

The real specs on the CI subset (the shared cache's pools): an OpenAI-compatible grader on a loopback server that
answers some requests with HTTP 500, some with a body that is not JSON and some with an answer the grader cannot
parse has its unavailable judgments counted by cause in report.md, manifest.json, unavailable.csv and at the end
of the terminal output, exactly as often as the server failed. A grader and a rerank server on a closed port are
declaration errors naming ``[rankers.<name>]`` when the session starts, before any pool is built.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from fixtures.settings import PROJECT_ROOT
from tests.support.faulty_chat_server import cycle, faulty_chat_server
from tests.support.loopback import free_port

SUBSET = ("--subset-pairs", "24", "--subset-seed", "0", "--grader-sample", "4")
SPLITS = ("confirmation", "test")
PROFILE = """
[profile]
name = "faults-causes"
description = "fusion and an OpenAI-compatible grader on a loopback server"

[models]
dense = "builtin:all-MiniLM-L6-v2"
sparse = "builtin:splade-tiny"

[rankers.fusion]
kind = "fusion"
order = 10
{rankers}
[gates]
fallback_pct_max = 0.0
"""
GRADER = """
[rankers.oa]
kind = "llm_grader"
backend = "openai"
url = "{url}"
model = "faults-loopback"
thinking = false
mode = "designated"
order = 50
"""
#: What the loopback server answers, spread over the inputs by a digest of each prompt, and the cause each reads as.
ANSWERS = {"http500": "HTTP 500 from {host}", "not_json": "JSONDecodeError from {host}",
           "unparseable": "unparseable answer", "grade": None}


def specs(results: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                           *SUBSET, "--profile", str(profile), "--results-dir", str(results), *extra],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=3600)


def test_unavailable_judgments_are_counted_by_cause_in_every_output(tmp_path: Path) -> None:
    with faulty_chat_server(cycle(list(ANSWERS))) as server:
        profile = tmp_path / "causes.toml"
        profile.write_text(PROFILE.format(rankers=GRADER.format(url=server.base_url)), encoding="utf-8")
        host = server.base_url.split("/")[2]
        result = specs(tmp_path / "results", profile, "-q")
    out = result.stdout
    assert result.returncode == 1, out[-4000:] + result.stderr[-2000:]  # the fallback gate fails, as it should
    expected = {ANSWERS[kind].format(host=host): n for kind, n in server.served.items() if ANSWERS[kind]}
    assert len(expected) == 3 and all(n > 0 for n in expected.values()), server.served
    counted: dict[str, int] = {}
    for split in SPLITS:
        folder = tmp_path / "results" / split
        entry = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["unavailable"]["oa"]["pair"]
        assert entry["unavailable"] == sum(entry["causes"].values()) > 0
        for cause, n in entry["causes"].items():
            counted[cause] = counted.get(cause, 0) + n
        table = pd.read_csv(folder / "unavailable.csv")
        assert dict(zip(table["cause"], table["count"])) == entry["causes"]
        line = f"oa (pair): {entry['unavailable']} of {entry['inputs']} judgments unavailable — "
        assert line in (folder / "report.md").read_text(encoding="utf-8")
        assert f"[{split}] {line}" in out  # at the end of the run, beside the gate that failed
        assert "gate fallback_pct_max (oa)" in out
    assert counted == expected  # every failure the server served, and nothing else, under its cause


def test_an_unreachable_server_is_a_declaration_error_before_any_pool_is_built(tmp_path: Path) -> None:
    port = free_port()
    rankers = (GRADER.format(url=f"http://127.0.0.1:{port}/v1")
               + f'\n[rankers.rr]\nkind = "rerank_api"\nurl = "http://127.0.0.1:{port}"\nmodel = "m"\norder = 60\n')
    profile = tmp_path / "dead.toml"
    profile.write_text(PROFILE.format(rankers=rankers), encoding="utf-8")
    cache = tmp_path / "cache"  # empty: any pool this run needed would be built here
    result = specs(tmp_path / "results", profile, "--cache-dir", str(cache), "-k", "test_table2_row and (oa or rr)")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-4000:]
    for name in ("oa", "rr"):
        assert f"{profile} [rankers.{name}]: " in out and f"127.0.0.1:{port}" in out
        assert f"declaration refused before any work: {profile} [rankers.{name}]" in result.stderr
    assert "is unreachable: ConnectError" in out
    built = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file()) if cache.exists() else []
    assert not [p for p in built if p.startswith(("pools", "embeddings", "models"))], built
