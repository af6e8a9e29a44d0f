"""The digests that key cached values and records have one home, ``fixtures.identity``.

A digest formula written twice is two places where a key can drift; so no production module outside the home
computes a hash itself (``hashlib`` or ``hmac`` calls), except the few listed here with why, and no module defines
a function that repeats one of the home's formulas under its own name. Keys that name a domain's own parts
(``rankers.lambdamart.input_digests``, ``rankers.scorers.judgment_records.request_key``) are built from the home's
digests and may live with their domain.
"""
from __future__ import annotations

import ast

from fixtures.settings import PROJECT_ROOT

PACKAGES = ("fixtures", "rankers", "reports", "harness")
HOME = "fixtures/identity.py"
#: Modules that compute hashes themselves, and why that is not a second home of a key's formula.
OWN_HASHING = {
    "fixtures/code.py": "streams every source file of a module closure into the code identity (its own formula)",
    "fixtures/models.py": "hashes a model file and each of its blocks in one read (the stamped digests' rolling check)",
    "fixtures/gguf.py": "digests a model download while it is written, before the file exists whole",
    "fixtures/userkey.py": "the HMAC under the user's key that seals a store: a keyed tag, not a content digest",
    "harness/memo.py": "a memo's HMAC tag and the key's folder name under the user's key",
    "rankers/scorers/store.py": "each stored judgment's HMAC under the user's key",
    "rankers/lambdamart_rows.py": "derives per-query sampling seeds from (seed, qid): randomness, not a key",
    "rankers/kinds/llm_listwise.py": "a seeded order of windows: randomness, not a key",
    "rankers/scorers/ce_recipe.py": "streams a recipe's training groups into its digest without joining them",
    "reports/explore.py": "streams the page's data and figures into the explorer's cache name",
}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            rel = path.relative_to(PROJECT_ROOT).as_posix()
            out.append((rel, ast.parse(path.read_text(encoding="utf-8"), rel)))
    return out


def _hashes(tree: ast.Module) -> list[int]:
    """Lines that call ``hashlib.<anything>`` or ``hmac.<anything>``."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("hashlib", "hmac")]


def test_only_the_home_and_the_listed_modules_compute_hashes() -> None:
    found = {rel: lines for rel, tree in _modules() if (lines := _hashes(tree))}
    strays = {rel: lines for rel, lines in found.items() if rel != HOME and rel not in OWN_HASHING}
    assert not strays, f"hash formulas outside {HOME} (use its digests, or list the module with why): {strays}"
    unused = sorted(set(OWN_HASHING) - set(found))
    assert not unused, f"listed as hashing but no longer do (remove them from OWN_HASHING): {unused}"


def test_no_module_redefines_a_digest_of_the_home() -> None:
    modules = dict(_modules())
    home = {n.name for n in modules[HOME].body if isinstance(n, ast.FunctionDef)}
    assert {"parts_digest", "items_digest", "texts_digest", "ordered_digest", "corpus_hash", "frame_digest"} <= home
    again = {rel: sorted(names) for rel, tree in modules.items() if rel != HOME
             and (names := {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} & home)}
    assert not again, f"functions named like {HOME}'s digests elsewhere: {again}"
