"""Code comments cite the protocol by section (``docs/protocol.md#<anchor>``): every cited anchor is a section."""
from __future__ import annotations

import re

from fixtures.settings import PROJECT_ROOT

PROTOCOL = PROJECT_ROOT / "docs" / "protocol.md"


def _anchors() -> set[str]:
    headings = re.findall(r"^## (.+)$", PROTOCOL.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_cited_protocol_section_exists() -> None:
    anchors = _anchors()
    assert {"window-rule", "caches", "claims", "listwise", "publishing"} <= anchors
    cited = {}
    for path in PROJECT_ROOT.rglob("*"):
        if path.suffix not in (".py", ".md", ".toml") or ".venv" in path.parts or not path.is_file():
            continue
        for anchor in re.findall(r"docs/protocol\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8", errors="ignore")):
            cited.setdefault(anchor, path.relative_to(PROJECT_ROOT).as_posix())
    missing = {a: p for a, p in cited.items() if a not in anchors}
    assert cited and not missing, f"cited protocol sections that do not exist: {missing}"


def test_every_cited_statistics_section_exists() -> None:
    """docs/statistics.md#<anchor> citations name a section (## or ###) of that document."""
    text = (PROJECT_ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    headings = re.findall(r"^###? (.+)$", text, flags=re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert {"weak-null", "tost", "pins", "h3", "calibration"} <= anchors
    cited = {}
    for path in PROJECT_ROOT.rglob("*"):
        if path.suffix not in (".py", ".md", ".toml") or ".venv" in path.parts or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="ignore")
        for anchor in re.findall(r"docs/statistics\.md#([a-z0-9-]+)", text):
            cited.setdefault(anchor, path.relative_to(PROJECT_ROOT).as_posix())
    missing = {a: p for a, p in cited.items() if a not in anchors}
    assert cited and not missing, f"cited statistics sections that do not exist: {missing}"


def _defines(path, name: str) -> bool:
    """Whether the module file defines ``name`` at its top level (a function, class or assignment), read without
    importing it."""
    import ast

    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_the_architecture_map_names_only_what_exists() -> None:
    """Every module, folder and top-level name docs/architecture.md cites in backticks is in the checkout."""
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"`((?:fixtures|rankers|reports|harness|specs|conftest|tests)[A-Za-z0-9_./]*)`", text))
    assert len(cited) > 20
    missing = []
    for ref in sorted(cited):
        if "/" in ref or ref.endswith(".py"):
            if not (PROJECT_ROOT / ref).exists():
                missing.append(ref)
            continue
        parts = ref.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module or package
            base = PROJECT_ROOT.joinpath(*parts[:cut])
            module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if module.is_file():
                rest = parts[cut:]
                if rest and not _defines(module, rest[0]):
                    missing.append(ref)
                break
        else:
            missing.append(ref)
    assert not missing, f"docs/architecture.md cites what does not exist: {missing}"


# ---- the README as a user's document, and the links of every doc ---------------------------------------------------

README = PROJECT_ROOT / "README.md"
#: A researcher reads the README in five minutes: its length, and where their own ranker's section starts.
README_MAX_LINES, OWN_RANKER_BEFORE_LINE = 350, 100
COMMAND_1 = "bash .ci/setup && .venv/bin/python -m pytest specs --benchmark-skip"


def _prose(text: str) -> str:
    """Markdown without fenced code blocks and inline code spans (their brackets are code, not links)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL))


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats
    numbered (-1, -2)."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M):
        base = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        anchor, k = base, 0
        while anchor in anchors:
            k += 1
            anchor = f"{base}-{k}"
        anchors.add(anchor)
    return anchors


def test_github_anchors_follow_githubs_rule() -> None:
    text = ("# Top\n## 6. Another system's run\n### Is it? (`specs/bench_client.py`)\n## Top\n"
            "```\n# not a heading\n```\n")
    assert github_anchors(text) == {"top", "6-another-systems-run", "is-it-specsbench_clientpy", "top-1"}


def test_the_readme_is_short_and_leads_to_the_users_own_ranker() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"
    own = lines.index("## Evaluate your own reranker") + 1
    assert own < OWN_RANKER_BEFORE_LINE, f"'Evaluate your own reranker' starts at line {own}"
    terms = next(i for i, line in enumerate(lines, 1) if line.startswith("## Terms"))
    assert terms < 40, f"the glossary starts at line {terms}, below the first screen"
    glossary = "\n".join(lines[terms:own]).lower()
    for term in ("direction", "designated", "preferred", "counterpart", "source group", "strict preference", "tie",
                 "fallback", "e0", "n=8"):
        assert f"| {term}" in glossary or f"/ {term}" in glossary, f"the glossary does not define {term!r}"


def test_the_readme_holds_no_dated_timing_entry() -> None:
    """Timings live in docs/benchmarks.md with their date and machine; the README keeps one undated line a command."""
    duration = re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:min|minutes|s|seconds|h|hours)\b")
    for paragraph in _prose(README.read_text(encoding="utf-8")).split("\n\n"):
        if re.search(r"\b20\d\d-\d\d-\d\d\b", paragraph):
            assert not duration.search(paragraph), f"a dated timing in README.md: {paragraph[:300]!r}"


def test_the_two_commands_are_the_first_code_block_and_command_2_is_what_ci_runs() -> None:
    first = re.search(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first and first.start() == README.read_text(encoding="utf-8").index("```"), "the first code block"
    commands = [line for line in first.group(1).splitlines() if line and not line.startswith("#")]
    ci = (PROJECT_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    [tests] = [line for line in ci.splitlines() if line.startswith(".venv/bin/python -m pytest tests specs")]
    assert "export HF_HUB_OFFLINE=1" in ci
    assert commands == [COMMAND_1, f"bash .ci/setup && HF_HUB_OFFLINE=1 {tests}"]


def _markdown_files() -> list:
    return [README, *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    """A link to a file names one that exists; a link with #anchor names a heading of that Markdown file."""
    broken = []
    for path in _markdown_files():
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(text)):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not this checkout's
            file, _, anchor = target.partition("#")
            where = (path.parent / file).resolve() if file else path
            if not where.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in github_anchors(where.read_text(encoding="utf-8")):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_reference_results_page_lists_every_published_number() -> None:
    """docs/reference-results.md shows each published NevIR row and each of the paper's Table II values it keeps."""
    from fixtures.reference import published_paired
    from reports.paper import paper_table2

    page = (PROJECT_ROOT / "docs" / "reference-results.md").read_text(encoding="utf-8")
    rows = published_paired()
    assert rows
    for row in rows:
        assert f"| {row.paired_pct:.1f} |" in page, f"{row.system} ({row.paired_pct}) is not on the page"
    paper = paper_table2("test")
    for column, digits in (("strict_pct", 2), ("paired_pct", 2), ("mrr", 4)):
        for value in paper[column].dropna():
            assert f"{value:.{digits}f}" in page, f"the paper's {column} {value} is not on the page"


# ---- times that hold, and no training step command 1 no longer takes ------------------------------------------------

#: A time the README states: a number, a range or a sum of two, and its unit ("16.3 min", "10–20 s", "9.7 + 5.7 min").
TIME = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?:\s*[–-]\s*(\d+(?:\.\d+)?))?(?:\s*\+\s*(\d+(?:\.\d+)?))?"
                  r"\s*(?:min|minutes?|s|seconds?|h|hours?)\b")
#: What a stated time must name beside it: the machine it was measured on, and its load.
MACHINE, LOAD = re.compile(r"AMD EPYC|Intel|Xeon|H100|H200"), re.compile(r"\bidle\b|\bload\b|\bquiet\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def test_every_time_the_readme_states_is_a_dated_measurement_named_with_its_machine_and_load() -> None:
    """Each time in the README is one docs/benchmarks.md records on a dated line, and the README's paragraph names
    the machine and the load it was measured at (a time without them read as a promise: "7 s" that took 75)."""
    dated = [line for line in (PROJECT_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
             if DATE.search(line)]
    undated, unsourced = [], []
    for paragraph in _prose(README.read_text(encoding="utf-8")).split("\n\n"):
        stated = [n for found in TIME.findall(paragraph) for n in found if n]
        if stated and not (MACHINE.search(paragraph) and LOAD.search(paragraph)):
            unsourced.append(paragraph[:160])
        undated += [n for n in stated
                    if not any(re.search(rf"(?<![\d.,]){re.escape(n)}(?!\d)", line) for line in dated)]
    assert not unsourced, f"README times without their machine and load: {unsourced}"
    assert not undated, f"README times docs/benchmarks.md does not record on a dated line: {undated}"


#: A sentence about what command 1, the first run or a subset run does, and a training verb in it.
RUN_SENTENCE = re.compile(r"[^.!?;:]*\b(?:command 1|the first run|a subset run|subset runs|the CI subset)\b[^.!?;]*",
                          re.I)
TRAINS = re.compile(r"\b(?:trains|fine-tunes|is trained|are trained|training step)\b", re.I)
NEGATED = re.compile(r"\b(?:nothing|not|no|never|neither|nor|retrain|instead of)\b", re.I)


def test_no_doc_says_command_1_or_a_subset_run_trains_what_the_checkout_ships() -> None:
    """Command 1 and the CI subset read LambdaMART's models and the cross-encoder's judgments from data/reference/:
    a doc saying they train (the tutorial's "the first run trains E0, N=8 and the cross-encoder") is stale.
    docs/benchmarks.md is a dated log of what runs did then, and is not read."""
    stale = []
    for path in [README, *sorted(p for p in (PROJECT_ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")]:
        text = re.sub(r"\s+", " ", _prose(path.read_text(encoding="utf-8")))
        stale += [f"{path.name}: {m.group(0).strip()[:200]}" for m in RUN_SENTENCE.finditer(text)
                  if TRAINS.search(m.group(0)) and not NEGATED.search(m.group(0))]
    assert not stale, stale
