"""Bad input that got through: control characters in a ``[data]`` set, unbounded names, values and lines, and a
batch result line whose numbers are out of range.

The probe wrote 48 raw NULs into ``runs/fusion.trec``, ``qrels.txt`` and ``directions.csv`` from a docno, a pair id
and a query; a sample named ``s€中`` crashed two specs under a Latin-1 locale; a 5 MB option value and long claim and
sample names were accepted; a 200 MB corpus line was read whole; one batch result line with a top logprob of 1000
aborted ``python -m harness.batch import`` with an ``OverflowError``, nothing stored. Each is now refused where it
is read, naming the file, the line and the field (docs/protocol.md#your-own-contrastive-pairs).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.datasets.pairs import MAX_LINE_BYTES, DataDecl, DatasetError, read_pair_set
from fixtures.settings import PROJECT_ROOT
from harness.batch_import import import_results
from harness.profile import load_profile
from harness.profile_records import ProfileError
from harness.profile_terms import CLAIM_NAME_MAX, OPTION_VALUE_MAX, VALUE_MAX
from rankers.scorers.cache import ScoreCache
from rankers.scorers.grader import LLMGrader
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from tests.harness.test_batch import INPUTS, SETTINGS, _export, _line

PAIR = {"pair_id": "a1", "query1": "which one", "query2": "which other", "passage1": "d1", "passage2": "d2"}
CORPUS = [{"docno": "d1", "text": "the first passage"}, {"docno": "d2", "text": "the second passage"}]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _read(tmp_path: Path, pairs: list[dict], corpus: list[dict] = CORPUS) -> None:
    read_pair_set(DataDecl(kind="pairs", name="mine", pairs=_jsonl(tmp_path / "pairs.jsonl", pairs),
                           corpus=_jsonl(tmp_path / "corpus.jsonl", corpus), where="mine.toml [data]"))


@pytest.mark.parametrize("file,field,char", [("corpus", "docno", "\x00"), ("corpus", "text", "\x00"),
                                             ("pairs", "pair_id", "\x00"), ("pairs", "query1", "\x00"),
                                             ("pairs", "query2", "\x1b"), ("pairs", "group", "\x00"),
                                             ("pairs", "passage2_text", "\x7f")])
def test_nul_in_data_is_refused_naming_file_line_and_field(tmp_path: Path, file: str, field: str, char: str) -> None:
    pairs = [dict(PAIR, pair_id="a0"), dict(PAIR)]
    corpus = [dict(c) for c in CORPUS]
    if file == "corpus":
        corpus[1][field] = corpus[1][field][:2] + char + corpus[1][field][2:]
        if field == "docno":
            pairs = [{**p, "passage2": corpus[1]["docno"]} for p in pairs]
    elif field == "passage2_text":
        pairs[1] = {**{k: v for k, v in pairs[1].items() if k != "passage2"}, field: f"inline{char}text"}
    else:
        pairs[1][field] = f"x{char}y"
    with pytest.raises(DatasetError) as caught:
        _read(tmp_path, pairs, corpus)
    line = 2
    assert str(caught.value).startswith(f"{tmp_path / f'{file}.jsonl'}:{line}: field {field!r} holds the control "
                                        f"character U+{ord(char):04X}"), caught.value


def test_tabs_and_line_breaks_stay_allowed_in_texts(tmp_path: Path) -> None:
    _read(tmp_path, [dict(PAIR, query1="two\nlines\tand a tab")])


def test_a_corpus_line_longer_than_the_limit_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(CORPUS[0]) + "\n")
        fh.write(json.dumps({"docno": "d2", "text": "x" * MAX_LINE_BYTES}) + "\n")
    with pytest.raises(DatasetError, match=rf"corpus\.jsonl:2: line longer than {MAX_LINE_BYTES:,} bytes"):
        read_pair_set(DataDecl(kind="pairs", pairs=_jsonl(tmp_path / "pairs.jsonl", [PAIR]), corpus=corpus))


HEAD = '[profile]\nname = "hostile"\nextends = "embedded"\n'
LIMITS = {
    "non-ASCII sample name": ('[samples."s€中"]\ndirections = 4\n', "[samples]", "must be portable"),
    "sample name with a space": ('[samples."my sample"]\ndirections = 4\n', "[samples]", "must be portable"),
    "overlong claim name": (f'[claims.{"h" * (CLAIM_NAME_MAX + 1)}]\nfamily = "H1"\n', "[claims]",
                            "must be portable"),
    "non-portable option name": ('[rankers.mine]\nkind = "python"\nfactory = "m:f"\nwindow = false\n'
                                 'options = { "my key" = 1 }\n', "[rankers.mine.options]", "must be portable"),
    "5 MB option value": ('[rankers.mine]\nkind = "python"\nfactory = "m:f"\nwindow = false\n'
                          f'options = {{ text = "{"t" * (OPTION_VALUE_MAX + 1)}" }}\n', "[rankers.mine.options]",
                          f"at most {OPTION_VALUE_MAX:,}"),
    "overlong factory": (f'[rankers.mine]\nkind = "python"\nfactory = "{"m" * VALUE_MAX}:f"\nwindow = false\n',
                         "[rankers.mine]", f"at most {VALUE_MAX:,}"),
}


@pytest.mark.parametrize("case", list(LIMITS))
def test_names_are_portable_and_values_bounded(tmp_path: Path, case: str) -> None:
    body, table, words = LIMITS[case]
    path = tmp_path / "hostile.toml"
    path.write_text(HEAD + body, encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    assert str(caught.value).startswith(f"{path} {table}:") and words in str(caught.value), str(caught.value)[:300]
    assert len(str(caught.value)) < 1000  # the value is not repeated back


def test_a_non_ascii_sample_name_under_a_latin1_locale_is_one_message_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "hostile.toml"
    path.write_text(HEAD + '[samples."s€中"]\ndirections = 4\n', encoding="utf-8")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "latin-1", "PYTHONUTF8": "0",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "harness.export", "--profile", str(path), "--out",
                             str(tmp_path / "out")], cwd=PROJECT_ROOT, capture_output=True, env=env, timeout=300)
    err = result.stderr.decode("latin-1")
    assert result.returncode == 2 and "Traceback" not in err and "UnicodeEncodeError" not in err, err[-3000:]
    assert "'s\\u20ac\\u4e2d' must be portable" in err, err[-3000:]


def test_batch_overflow_a_line_with_an_out_of_range_logprob_is_named_and_the_rest_imported(tmp_path: Path) -> None:
    """batch-overflow: a top logprob of 1000 (``math.exp`` overflows) is one named line; the others are stored."""
    grader = LLMGrader(OpenAIBackend("http://127.0.0.1:9/v1", "m", settings=SETTINGS))
    requests = _export(tmp_path / "export", grader, INPUTS[:3])
    overflow = json.loads(_line(requests[1], "3"))
    overflow["response"]["body"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = 1000
    results = tmp_path / "export" / "g.results.jsonl"
    results.write_text("\n".join([_line(requests[0], "2"), json.dumps(overflow), _line(requests[2], "4")]) + "\n")
    done = import_results(results, tmp_path / "export")
    assert done.stored == 2 and done.missing == 0, done
    assert done.problems == ["g.results.jsonl line 2: out of range: token 0 ('3') has log-probability 1000.0, out "
                             "of range (a log-probability is <= 0); not stored"], done.problems
    keys = [tuple(json.loads(line)["key"]) for line in (tmp_path / "export" / "g.index.jsonl").read_text().splitlines()]
    with ScoreCache.in_folder(tmp_path / "export" / "scores") as cache:
        stored, _ = cache.lookup(keys)
    assert sorted(k[2] for k in stored) == ["p0", "p2"]
