"""The shipped ranker kinds: what each checks, needs, shares and reads, and the one code digest behind their keys."""
from __future__ import annotations

import importlib.util
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from fixtures import code
from rankers.kinds import kind
from rankers.kinds.base import DeclarationError, RankerDecl
from rankers.declarations import parse_declaration


def test_the_grader_needs_llama_cpp_only_on_the_cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    grader = kind("llm_grader")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    [needed] = grader.requirements({"backend": "llamacpp"})
    assert not needed.met() and "llama-cpp-python is not available here" in needed.reason
    assert grader.requirements({"backend": "openai", "url": "http://127.0.0.1:8000/v1"}) == ()
    assert {r.what for r in grader.requirements({"backend": "vllm"})} == {"vllm", "a CUDA device"}


def test_a_gpu_mark_or_a_cuda_device_option_needs_cuda() -> None:
    ce = parse_declaration("ce", {"kind": "cross_encoder", "model": "m", "device": "cuda:0"}, "p [rankers.ce]")
    fused = parse_declaration("f", {"kind": "fusion", "marks": ["gpu"]}, "p [rankers.f]")
    assert [r.what for r in ce.requirements()] == ["a CUDA device"] == [r.what for r in fused.requirements()]
    assert parse_declaration("f", {"kind": "fusion"}, "p").requirements() == ()


@pytest.mark.parametrize("table, message", [
    ({"kind": "llm_grader", "backend": "openai", "model": "m"}, "backend 'openai' needs 'url'"),
    ({"kind": "llm_grader", "backend": "llamacpp", "model": "m", "grade": "mean"}, "grade must be 'argmax'"),
    ({"kind": "rerank_api", "url": "ftp://h/v1", "model": "m"}, "scheme must be http or https"),
    ({"kind": "fusion", "thresholds": {"dense": "high"}}, "could not convert"),
    ({"kind": "lambdamart", "background": -3}, "background must be an integer >= 0"),
    ({"kind": "lambdamart", "background": 8, "seeds": 0}, "seeds must be an integer >= 1"),
    ({"kind": "llm_grader", "backend": "llamacpp", "model": "m", "url": "http://h:1/v1"},
     "'url' applies to backend 'openai' only"),
    ({"kind": "llm_grader", "backend": "openai", "model": "m", "url": "http://h:99999/v1"}, "invalid port"),
    ({"kind": "llm_grader", "backend": "openai", "model": "m", "url": "http://h/v1", "max_reply_chars": 0},
     "max_reply_chars must be a positive integer"),
    ({"kind": "rerank_api", "url": "http://h/v1", "model": "m", "max_reply_chars": -5}, "max_reply_chars"),
])
def test_each_kind_checks_its_option_values_when_the_profile_is_read(table, message) -> None:
    with pytest.raises(DeclarationError, match=message):
        parse_declaration("r", table, "mine.toml [rankers.r]")


def test_argmax_and_expected_grade_twins_share_judgments_and_read_them_differently() -> None:
    argmax = parse_declaration("g", {"kind": "llm_grader", "backend": "llamacpp", "model": "m"}, "p")
    expected = parse_declaration("e", {"kind": "llm_grader", "backend": "llamacpp", "model": "m",
                                       "grade": "expected"}, "p")
    assert argmax.scorer_options == expected.scorer_options  # one scorer, one cache key, no second model call
    frame = pd.DataFrame({"qid": ["q", "q"], "pid": ["a", "b"], "score": [2.0, float("nan")],
                          "usage": [{"grade_probs": [0.0, 0.0, 0.5, 0.5, 0.0]}, {}]})
    scored = SimpleNamespace(frame=frame, scores={("q", "a"): 2.0, ("q", "b"): float("nan")})
    assert kind("llm_grader").read(argmax, scored) is scored.scores
    read = kind("llm_grader").read(expected, scored)
    assert read[("q", "a")] == 2.5 and math.isnan(read[("q", "b")])


def test_a_python_declaration_is_a_window_or_a_full_pool_ranker_by_its_window_option() -> None:
    window = parse_declaration("w", {"kind": "python", "factory": "m:f"}, "p")
    pool = parse_declaration("p", {"kind": "python", "factory": "m:f", "window": False}, "p")
    assert window.is_window and window.reference == "fusion" and not pool.is_window and pool.reference is None
    with pytest.raises(DeclarationError, match="apply to window rankers only"):
        parse_declaration("p", {"kind": "python", "factory": "m:f", "window": False, "reference": "fusion"}, "p")


def test_the_profile_key_compare_to_is_the_declarations_baseline() -> None:
    decl = parse_declaration("r", {"kind": "fusion", "compare_to": "other"}, "p")
    assert isinstance(decl, RankerDecl) and decl.baseline == "other"


def test_a_code_digest_follows_imports_and_package_data_and_nothing_else() -> None:
    files = {p.relative_to(code.PROJECT_ROOT).as_posix() for name, p in code._closure(("rankers.fusion",))[0].items()}
    assert {"rankers/fusion.py", "rankers/base.py", "rankers/__init__.py"} <= files
    assert "rankers/window.py" not in files and "harness/session.py" not in files
    grader = code._closure(("rankers.scorers.grader",))[0]
    assert any(p.name == "grade_v2.txt" for p in code._package_data(grader["rankers.scorers.prompts"]))
    assert code.code_digest("rankers.fusion") != code.code_digest("rankers.base")
    assert "lightgbm" in code.library_versions("rankers.lambdamart")


def test_a_code_digest_changes_with_an_imported_module_and_not_with_an_unrelated_one(tmp_path, monkeypatch) -> None:
    package = tmp_path / "pkgx"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkgx import b\n")
    (package / "b.py").write_text("X = 1\n")
    (package / "c.py").write_text("Y = 1\n")
    monkeypatch.setattr(code, "PROJECT_ROOT", tmp_path)

    def digest() -> str:
        for cached in (code.code_digest, code._closure, code._imports):
            cached.cache_clear()
        return code.code_digest("pkgx.a")

    first = digest()
    (package / "c.py").write_text("Y = 2\n")
    assert digest() == first
    (package / "b.py").write_text("X = 2\n")
    assert digest() != first


def test_imports_are_found_in_every_statement_block_and_nowhere_else(tmp_path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import a\n"
        "def f():\n    import b.c\n    return [x for x in ()]\n"
        "class K:\n    from d import e\n"
        "try:\n    import g\nexcept ImportError:\n    import h\nelse:\n    import i\nfinally:\n    import j\n"
        "if True:\n    pass\nelse:\n    import k\n"
        "while False:\n    import l\n"
        "with open('x') as fh:\n    import m\n"
        "match 1:\n    case 1:\n        import n\n"
        "from . import relative\n"
        "s = 'import not_code'\n"
    )
    code._imports.cache_clear()
    assert sorted(code._imports(source)) == ["a", "b.c", "d", "d.e", "g", "h", "i", "j", "k", "l", "m", "n"]


def _fresh_digests() -> None:
    """What a new process starts with: no digest computed yet."""
    for cached in (code.code_digest, code._closure, code._imports):
        cached.cache_clear()


def test_a_python_scorer_key_follows_its_module_and_what_it_imports_from_its_folder(tmp_path, monkeypatch) -> None:
    import hashlib

    import numpy as np

    from rankers.scorers.python_scorer import load_python_scorer

    folder = tmp_path / "mycode"
    folder.mkdir()
    name = f"scorer_{tmp_path.name}"  # a module name no other test imported
    scorer = folder / f"{name}.py"
    scorer.write_text(f"import numpy\nfrom rankers.scorers.base import ScoreBatch\nimport helper_{tmp_path.name}\n\n\n"
                      "class S:\n    model_key = 'mine-v1'\n\n    def score(self, inputs):\n"
                      "        return [1.0] * len(inputs)\n\n\ndef make():\n    return S()\n")
    helper = folder / f"helper_{tmp_path.name}.py"
    helper.write_text("import json\nWEIGHT = 1\n")
    (folder / "unrelated.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(folder))
    decl = parse_declaration("mine", {"kind": "python", "factory": f"{name}:make"}, "p")
    # A fresh session each time: nothing shared between calls, so the factory is loaded again.
    ctx = SimpleNamespace(cache=lambda *parts: tmp_path / "cache", shared=lambda key, make: make(),
                          where=lambda decl: f"p: [rankers.{decl.name}]")

    def keys() -> tuple[dict, str]:
        _fresh_digests()
        return kind("python").identity(decl, ctx), load_python_scorer(f"{name}:make").model_key

    identity, key = keys()
    assert identity["model_key"] == key  # the loaded scorer's key, ending in its own model_key, asked every run
    # Hand-computed: the two files of its folder it reaches, by path relative to the folder, in module order;
    # the suite's own module (rankers.scorers.base) and the standard library are not the scorer's code.
    h = hashlib.sha256()
    for path in sorted((scorer, helper), key=lambda p: p.stem):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    assert identity["factory_code"] == {"code": h.hexdigest()[:24], "libraries": {"numpy": np.__version__}}
    assert key.startswith(f"python|{name}:make|{{}}|code:") and key.endswith("|mine-v1")
    (folder / "unrelated.py").write_text("X = 2\n")
    assert keys() == (identity, key)
    helper.write_text("import json\nWEIGHT = 2\n")  # model_key unchanged: the code alone moved
    after_helper = keys()
    assert after_helper[0] != identity and after_helper[1] != key
    scorer.write_text(scorer.read_text() + "# a comment is an edit too\n")
    after_scorer = keys()
    assert len({key, after_helper[1], after_scorer[1]}) == 3


# ----------------------------------------------------------------------------- before any work


def test_a_reply_cap_is_storage_not_identity() -> None:
    capped = parse_declaration("a", {"kind": "rerank_api", "url": "http://h/v1", "model": "m", "max_reply_chars": 99},
                               "p")
    plain = parse_declaration("b", {"kind": "rerank_api", "url": "http://h/v1", "model": "m"}, "p")
    assert capped.scorer_options == plain.scorer_options == {"url": "http://h/v1", "model": "m"}


def _refused(decls: list[RankerDecl]) -> dict[str, str]:
    from rankers.kinds.base import contact_all

    return contact_all(decls, lambda d: f"mine.toml [rankers.{d.name}]")


def test_every_server_kind_refuses_an_unreachable_url_before_any_work() -> None:
    from tests.support.loopback import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    decls = [parse_declaration("rr", {"kind": "rerank_api", "url": dead, "model": "m"}, "p"),
             parse_declaration("oa", {"kind": "llm_grader", "backend": "openai", "url": f"{dead}/v1", "model": "m"},
                               "p"),
             parse_declaration("fusion", {"kind": "fusion"}, "p")]
    refused = _refused(decls)
    assert set(refused) == {"rr", "oa"}  # a kind without a server has nothing to check
    assert refused["rr"].startswith("mine.toml [rankers.rr]: rerank_api server URL") and "unreachable" in refused["rr"]
    assert refused["oa"].startswith("mine.toml [rankers.oa]: grader URL") and "unreachable" in refused["oa"]
    assert f"GET {dead}/v1/models" in refused["oa"]


def test_a_reachable_server_passes_and_any_kind_with_a_url_is_checked() -> None:
    from rankers.kinds.base import RankerKind
    from tests.support.faulty_chat_server import cycle, faulty_chat_server
    from tests.support.kinds import registered
    from tests.support.loopback import free_port
    from tests.support.rerank_server import contract_rerank_server

    class Remote(RankerKind):  # a kind some researcher adds, with a server of its own
        name = "remote_test_kind"
        options = {"url": (str,)}

    with registered(Remote()), contract_rerank_server(lambda q, p: 1.0) as rerank, \
            faulty_chat_server(cycle(["grade"])) as chat:
        decls = [parse_declaration("rr", {"kind": "rerank_api", "url": rerank.base_url, "model": "m"}, "p"),
                 parse_declaration("oa", {"kind": "llm_grader", "backend": "openai", "url": chat.base_url,
                                          "model": "faulty"}, "p"),
                 parse_declaration("mine", {"kind": "remote_test_kind", "url": chat.base_url}, "p"),
                 parse_declaration("gone", {"kind": "remote_test_kind", "url": f"http://127.0.0.1:{free_port()}"},
                                   "p")]
        assert list(_refused(decls)) == ["gone"]
        assert [path for path, _ in rerank.requests] == ["/v1/rerank"]  # one tiny rerank request, no more
        assert [body["model"] for body in chat.requests] == []  # a grader server is only asked GET /models


def test_a_lambdamart_declaration_trains_five_seeds_unless_it_says_otherwise() -> None:
    """The run's seed first (Table II's row), then the ones after it; other kinds are not trained with seeds."""
    bg8 = parse_declaration("bg8", {"kind": "lambdamart", "background": 8}, "p")
    assert bg8.ranker_kind.seeds(bg8.options, 13) == (13, 14, 15, 16, 17)
    e0 = parse_declaration("e0", {"kind": "lambdamart", "background": 0, "seeds": 1}, "p")
    assert e0.ranker_kind.seeds(e0.options, 13) == (13,)
    fusion = parse_declaration("f", {"kind": "fusion"}, "p")
    assert fusion.ranker_kind.seeds(fusion.options, 13) == ()
