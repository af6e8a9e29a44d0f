"""Where each study model of this checkout is: ``python -m harness.models [--profile P] [--no-train]``.

Command 1 trains nothing (LambdaMART's models and the cross-encoder's judgments ship in ``data/reference/``), so the
trained folders a researcher would hand to their own kind (the fine-tuned cross-encoder to ``kind = "rerankers"``, a
LambdaMART model to LightGBM) are not in the cache after it, and their names are content digests that change with
the code and data. This command prints each one's folder for this checkout, profile and cache: a LambdaMART model
the checkout ships is copied into the cache (seconds); a model that is neither cached nor shipped is trained, its
cost stated first (the documented cost for this machine's load, ``harness.explain.contention``); ``--no-train``
only says what would be trained and at what cost. The run manifest names the same folders
(``manifest.json`` ``model:<ranker>``; docs/tutorial.md#the-studys-models).

The same entry says which model scored a row, and why not the shipped one (docs/protocol.md#shipped-reference):
where the cross-encoder's shipped judgments fail their seal (an edited file), the run refuses them and computes in
their place, and a subset run whose cache lacks the full model trains the smaller CI-budget one, whose row differs
(MRR 0.229 against 0.401 in a probe). So the cross-encoder's entry carries the model's budget, its score-cache key,
where its judgments came from and, when the shipped ones were refused, why; the report's bottom line and the
terminal name such a row (``reports.bottom_line.substitutions``). A refused LambdaMART file is retrained from the
same inputs, byte for byte the shipped one (``tests/rankers/test_shipped.py``), so no other model scores its rows.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fixtures.artifacts import ArtifactCorrupt, check_seal
from fixtures.settings import Settings, pin_cpu_kernels
from rankers.kinds.lambdamart import LambdaMART
from rankers.lambdamart_rows import variant_name
from rankers.shipped import judgments_path


@dataclass(frozen=True)
class StudyModel:
    """One trained model of the study: the ranker it serves, what it is, and its folder (None: not trained here)."""

    ranker: str
    what: str
    path: Path | None
    state: str


def _training(evaluation, rankers: Collection[str] | None = None) -> Iterator[tuple[object, list[int]]]:
    """The profile's rankers that train a model here (of ``rankers`` only, when given), with the seeds each trains
    (LambdaMART's all; the CE's one)."""
    for decl in evaluation.profile.ordered():
        if rankers is not None and decl.name not in rankers:
            continue
        if decl.kind == "lambdamart":
            yield decl, list(decl.ranker_kind.seeds(decl.options, evaluation.settings.seed))
        elif decl.kind == "cross_encoder" and decl.options.get("model") == "trained":
            yield decl, [evaluation.settings.seed]


def study_models(evaluation, train: bool, say=print, rankers: Collection[str] | None = None) -> list[StudyModel]:
    """Each study model's folder (of ``rankers`` only, when given), trained now where ``train`` allows (its cost said
    first through ``say``)."""
    from harness.explain import DOCUMENTED_S, contention  # the documented costs, priced for this machine's load

    ctx, out = evaluation.context, []
    for decl, seeds in _training(evaluation, rankers):
        if decl.kind == "lambdamart":
            for seed in seeds:
                trained = LambdaMART.trained(ctx, int(decl.options["background"]), seed)
                out.append(StudyModel(decl.name, f"LambdaMART {variant_name(int(decl.options['background']))}, seed "
                                                 f"{seed}", trained.path, "in the cache"))
            continue
        from rankers.scorers.ce_store import is_trained  # reads the model's folder only
        from rankers.scorers.ce_training import plan_training  # heavy: torch and transformers

        state = decl.ranker_kind.trained_state(decl, ctx)
        study, pool, _ = decl.ranker_kind.training_data(decl, ctx)
        folder = plan_training(study, pool("train"), pool("development"), ctx.cache("models", "cross-encoder"),
                               seed=ctx.seed, budget=state.budget).out
        what = f"fine-tuned cross-encoder ({state.budget} budget)"
        if is_trained(folder):
            out.append(StudyModel(decl.name, what, folder, "in the cache"))
            continue
        cost = DOCUMENTED_S[("train_cross_encoder", f"{state.budget} budget")] * contention()
        say(f"{decl.name}: {what} is not trained here ({'its judgments ship with the checkout; ' if state.shipped else ''}"
            f"training it takes about {cost / 60:.1f} min on this machine now: the documented {state.budget} budget "
            "on 2 quiet cores, scaled for its load)")
        if not train:
            out.append(StudyModel(decl.name, what, None, f"to train, about {cost / 60:.1f} min"))
            continue
        trained = decl.ranker_kind.trained(decl, ctx)
        out.append(StudyModel(decl.name, what, trained.path, "trained now"))
    return out


#: What the manifest says of a study model this run did not load (its ranking or judgments were read instead).
NOT_LOADED = "not loaded by this run (its rankings or judgments were read: the memo or data/reference/); " \
             "python -m harness.models gives its folder"


def shipped_refusal(identity: dict) -> str | None:
    """Why the judgments shipped for this judge identity are not used: a file fails its plain seal (None: none ship
    for it, or they verify), as ``rankers.shipped.ShippedJudgments.find`` refuses them."""
    manifest = judgments_path(identity)
    if not manifest.is_file() or not manifest.with_suffix(".parquet").is_file():
        return None
    for path, what in ((manifest, "judgments manifest"), (manifest.with_suffix(".parquet"), "judgments table")):
        try:
            check_seal(path, what, keyed=False)
        except ArtifactCorrupt as exc:  # it names the file
            return f"shipped {exc} (restore it with git checkout -- data/reference)"
        except OSError as exc:
            return f"shipped {what} {path}: {exc}"
    return None


def _cross_encoder(evaluation, decl) -> dict[str, str | None]:
    """The trained cross-encoder's entry: which model scored the ranker (its budget: the full one's judgments ship,
    a subset run without them trains the CI budget's), its score-cache key, where its judgments came from, and why
    the shipped ones were refused (None: they were used, or none ship for these inputs)."""
    ctx, kind = evaluation.context, decl.ranker_kind
    state = kind.trained_state(decl, ctx)
    whose = "NevIR's" if decl.options.get("train_on") == "nevir" else "the dataset's"
    model = evaluation.loaded(("trained-cross-encoder", decl.options.get("train_on", "dataset")))
    return {"model": f"the cross-encoder fine-tuned on {whose} Train pools, {state.budget} budget",
            "path": str(model.path) if model is not None else NOT_LOADED,
            "model_key": kind.scorer(decl, ctx).model_key,
            "source": ("its judgments shipped in data/reference/judgments/" if state.shipped
                       else "fine-tuned by this suite (the cache's models/cross-encoder/)"),
            "refused": shipped_refusal(kind.identity(decl, ctx, "full")) if ctx.shipped else None}


def manifest_entry(evaluation, ranker: str) -> dict[str, dict[str, str | None]]:
    """``manifest.json``'s ``model:<ranker>``: each model ``ranker`` trains, its folder where this run loaded or
    trained it (else how to get it) and, for the cross-encoder, which model scored it (``_cross_encoder``); read
    from the session's loaded models and the kinds' keys, so a warm run loads nothing for it."""
    loaded = evaluation.loaded
    entry: dict[str, dict[str, str | None]] = {}
    for decl, seeds in (t for t in _training(evaluation) if t[0].name == ranker):
        if decl.kind == "lambdamart":
            background = int(decl.options["background"])
            for seed in seeds:
                model = loaded(("lambdamart", background, seed, False))
                entry[f"{decl.name}@seed{seed}"] = {"model": f"LambdaMART {variant_name(background)}",
                                                    "path": str(model.path) if model is not None else NOT_LOADED}
        else:
            entry[decl.name] = _cross_encoder(evaluation, decl)
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.models", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded", help="a shipped profile's name or a profile file")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the suite's cache (default: the run's)")
    parser.add_argument("--no-train", action="store_true", help="say what would be trained and its cost; train none")
    args = parser.parse_args(argv)
    pin_cpu_kernels()  # the same kernels as a run: a model trained here is the one a run would train
    from harness.profile import load_profile  # after the kernels are pinned: the session may load torch
    from harness.profile_records import ProfileError  # after the kernels are pinned, with the profile
    from harness.session import Evaluation  # after the kernels are pinned: the session may load torch

    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        parser.error(str(exc))
    settings = Settings(**({"cache_dir": args.cache_dir} if args.cache_dir else {}))
    models = study_models(Evaluation(settings, profile, contact=False), train=not args.no_train)
    for model in models:
        print(f"{model.ranker}\t{model.what}\t{model.path or '-'}\t{model.state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
