"""Where each study model of this checkout is: ``python -m harness.models [--profile P] [--no-train]``.

Command 1 trains nothing (LambdaMART's models and the cross-encoder's judgments ship in ``data/reference/``), so the
trained folders a researcher would hand to their own kind (the fine-tuned cross-encoder to ``kind = "rerankers"``, a
LambdaMART model to LightGBM) are not in the cache after it, and their names are content digests that change with
the code and data. This command prints each one's folder for this checkout, profile and cache: a LambdaMART model
the checkout ships is copied into the cache (seconds); a model that is neither cached nor shipped is trained, its
cost stated first (the documented cost for this machine's load, ``harness.explain.contention``); ``--no-train``
only says what would be trained and at what cost. The run manifest names the same folders
(``manifest.json`` ``model:<ranker>``; docs/tutorial.md#the-studys-models).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fixtures.settings import Settings, pin_cpu_kernels
from rankers.kinds.lambdamart import LambdaMART
from rankers.lambdamart_rows import variant_name


@dataclass(frozen=True)
class StudyModel:
    """One trained model of the study: the ranker it serves, what it is, and its folder (None: not trained here)."""

    ranker: str
    what: str
    path: Path | None
    state: str


def _training(evaluation) -> Iterator[tuple[object, list[int]]]:
    """The profile's rankers that train a model here, with the seeds each trains (LambdaMART's all; the CE's one)."""
    for decl in evaluation.profile.ordered():
        if decl.kind == "lambdamart":
            yield decl, list(decl.ranker_kind.seeds(decl.options, evaluation.settings.seed))
        elif decl.kind == "cross_encoder" and decl.options.get("model") == "trained":
            yield decl, [evaluation.settings.seed]


def study_models(evaluation, train: bool, say=print) -> list[StudyModel]:
    """Each study model's folder, trained now where ``train`` allows (its cost said first through ``say``)."""
    from harness.explain import DOCUMENTED_S, contention  # the documented costs, priced for this machine's load

    ctx, out = evaluation.context, []
    for decl, seeds in _training(evaluation):
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


def manifest_entry(evaluation, ranker: str) -> dict[str, dict[str, str]]:
    """``manifest.json``'s ``model:<ranker>``: the folder of each model ``ranker`` trains, where this run loaded or
    trained it, else how to get it; read from the session's loaded models only, so a warm run pays nothing for it."""
    loaded = evaluation.loaded
    entry: dict[str, dict[str, str]] = {}
    for decl, seeds in (t for t in _training(evaluation) if t[0].name == ranker):
        if decl.kind == "lambdamart":
            background = int(decl.options["background"])
            for seed in seeds:
                model = loaded(("lambdamart", background, seed, False))
                entry[f"{decl.name}@seed{seed}"] = {"model": f"LambdaMART {variant_name(background)}",
                                                    "path": str(model.path) if model is not None else NOT_LOADED}
        else:
            model = loaded(("trained-cross-encoder", decl.options.get("train_on", "dataset")))
            entry[decl.name] = {"model": "fine-tuned cross-encoder",
                                "path": str(model.path) if model is not None else NOT_LOADED}
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
