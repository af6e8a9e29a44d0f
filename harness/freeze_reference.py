"""Write the study's trained models and judgments into ``data/reference/`` (``docs/protocol.md#shipped-reference``).

``python -m harness.freeze_reference`` takes them from the cache the embedded profile's run filled (command 1),
training or judging whatever is missing, never reading what the checkout already ships (``retrain``): every
LambdaMART model the study trains (each variant's seeds and their perturbed copies) and the trained cross-encoder's
judgments of Test's and confirmation's windows and designated pairs, keyed by its identity. Run it after a change to
the code those depend on (``tests/rankers/test_shipped.py`` says when) and commit ``data/reference/``; the folder then
holds exactly what this code ships, nothing older. ``--check`` retrains and rejudges everything in an empty cache
and compares it with what ships.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fixtures import progress
from fixtures.artifacts import copy_sealed
from fixtures.settings import Settings, pin_cpu_kernels
from harness.profile import load_profile
from harness.session import Evaluation
from rankers.declarations import RankerDecl
from rankers.shipped import JUDGMENT_COLUMNS, SHIPPED_DIR, ShippedJudgments, write_judgments

#: The splits whose judgments ship: those the embedded study evaluates (a subset run's inputs are among them).
SPLITS = ("test", "confirmation")
#: What a window judge is asked on a split: its reference's windows and the designated pairs (Table III's row).
SCOPES = ("window", "pair")
#: The LambdaMART files a shipped model folder holds, the manifest last (as a build writes them).
MODEL_FILES = ("model.txt", "manifest.json")


def study_session(cache_dir: Path | None = None) -> Evaluation:
    """The embedded profile's full run, reading nothing the checkout ships (what the shipped files must equal)."""
    settings = Settings(splits=SPLITS, retrain=True, **({} if cache_dir is None else {"cache_dir": cache_dir}))
    return Evaluation(settings, load_profile("embedded", ("train", "development", *SPLITS)), contact=False)


def lambdamart_models(ev: Evaluation) -> list[Path]:
    """Every LambdaMART model the study reads: each declared variant's seeds, plain and perturbed (trained now if
    the cache lacks one)."""
    folders = []
    for decl in _declared(ev, "lambdamart"):
        kind, background = decl.ranker_kind, int(decl.options["background"])
        for seed in ev.seeds(decl.name):
            for perturbed in (False, True):
                folders.append(kind.trained(ev.context, background, seed, perturbed).path)
    return folders


def judgments(ev: Evaluation, name: str) -> tuple[dict, str, pd.DataFrame]:
    """A trained judge's identity, cache key and stored judgments of the study's inputs (judged now if missing)."""
    from rankers.kinds.base import score_store  # sqlite store, no model
    from rankers.scorers.pointwise import point_requests  # request keys, no model

    decl = ev.decl(name)
    kind, ctx = decl.ranker_kind, ev.context
    model_key = kind.scorer(decl, ctx).model_key
    rows = []
    for split in SPLITS:
        for scope in SCOPES:
            ev.text_scores(split, name, scope)  # judges whatever the store lacks
            _, keys, _ = point_requests(model_key, ev.inputs(split, name, scope))
            found, missing = score_store(ctx).lookup(dict.fromkeys(keys))
            unavailable = [k for k, v in found.items() if v.score is None]
            if missing or unavailable:
                raise RuntimeError(f"{name} {scope} {split}: {len(missing)} judgments missing and {len(unavailable)} "
                                   "unavailable after judging: rerun command 1, then this")
            rows += [(*key[1:], v.score, json.dumps(v.usage, sort_keys=True)) for key, v in found.items()]
    frame = pd.DataFrame(rows, columns=list(JUDGMENT_COLUMNS)).drop_duplicates(["query_sha", "pid", "passage_sha"])
    return kind.identity(decl, ctx), model_key, frame


def _declared(ev: Evaluation, kind: str) -> list[RankerDecl]:
    return [d for d in ev.profile.ordered() if d.kind == kind]


def freeze(ev: Evaluation, target: Path = SHIPPED_DIR) -> list[Path]:
    """Write the study's models and judgments under ``target`` (replacing what it held); returns the files written."""
    written: list[Path] = []
    models = target / "lambdamart"
    shutil.rmtree(models, ignore_errors=True)
    for folder in lambdamart_models(ev):
        for name in MODEL_FILES:  # from the user's own cache (keyed) to the checkout's plain seal
            dst = models / folder.name / name
            copy_sealed(folder / name, dst, "LightGBM ranker file", source_keyed=True, keyed=False)
            written.append(dst)
    shutil.rmtree(target / "judgments", ignore_errors=True)
    for decl in _declared(ev, "cross_encoder"):
        if decl.options.get("model") == "trained" and decl.options.get("train_on", "dataset") == "dataset":
            written.append(write_judgments(*judgments(ev, decl.name), shipped_dir=target))
    return written


def model_differences(folder: Path, shipped_dir: Path = SHIPPED_DIR) -> list[str]:
    """How a LambdaMART model trained here differs from the one shipped under its folder name: its ``model.txt`` byte
    for byte, its manifest but for the training seconds; [] when they agree."""
    shipped = shipped_dir / "lambdamart" / folder.name
    if not shipped.is_dir():
        return [f"{folder.name}: trained here, not shipped"]
    problems = []
    if (folder / "model.txt").read_bytes() != (shipped / "model.txt").read_bytes():
        problems.append(f"{folder.name}/model.txt differs")
    mine, theirs = (json.loads((p / "manifest.json").read_text(encoding="utf-8")) for p in (folder, shipped))
    if {**mine, "train_seconds": 0} != {**theirs, "train_seconds": 0}:
        problems.append(f"{folder.name}/manifest.json differs")
    return problems


def check(ev: Evaluation, shipped_dir: Path = SHIPPED_DIR) -> list[str]:
    """What differs between the shipped files and what ``ev`` computes (trains and judges on an empty cache): every
    LambdaMART model file byte for byte (the manifest but for its training seconds), and every shipped judgment's
    score; [] when they agree."""
    problems = [problem for folder in lambdamart_models(ev) for problem in model_differences(folder, shipped_dir)]
    for decl in _declared(ev, "cross_encoder"):
        if decl.options.get("model") != "trained" or decl.options.get("train_on", "dataset") != "dataset":
            continue
        identity, model_key, frame = judgments(ev, decl.name)
        found = ShippedJudgments.find(identity, shipped_dir)
        if found is None:
            problems.append(f"{decl.name}: no judgments ship for the identity computed here")
            continue
        keys = ["query_sha", "pid", "passage_sha"]
        both = frame.merge(found.frame(), on=keys, how="outer", suffixes=("", "_shipped"), indicator=True)
        unmatched = int((both["_merge"] != "both").sum())
        differ = int((both["score"] != both["score_shipped"]).sum())
        if model_key != found.model_key or unmatched or differ:
            problems.append(f"{decl.name}: model key {'equal' if model_key == found.model_key else 'differs'}, "
                            f"{unmatched} judgments in one set only, {differ} scores differ")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.freeze_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=None, help="the cache command 1 filled (default: the "
                                                                     "suite's)")
    parser.add_argument("--check", action="store_true",
                        help="retrain and rejudge in an empty cache (about 10 minutes on two cores) and compare with "
                             "what ships, instead of freezing")
    args = parser.parse_args(argv)
    pin_cpu_kernels()  # as the suite does, before anything loads torch: what ships is what the suite computes
    if args.check:
        with tempfile.TemporaryDirectory(prefix="nevir-reference-check-") as empty:
            problems = check(study_session(Path(empty)))
        for problem in problems:
            progress.note(f"shipped reference check: {problem}")
        progress.note("shipped reference check: " + ("failed" if problems else "every model and judgment equal"))
        return 1 if problems else 0
    written = freeze(study_session(args.cache_dir))
    progress.note(f"froze {len(written)} files under {SHIPPED_DIR}: commit data/reference/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
