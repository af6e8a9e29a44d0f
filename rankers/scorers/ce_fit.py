"""The cross-encoder's training loop: steps, development evaluation, checkpoint selection and the sealed save.

A checkpoint is judged as the study judges rankers: development window strict preference and preferred-passage MRR
with fusion tie-breaking (``docs/protocol.md#cross-encoder``). The saved folder's manifest records every file's
sha256 and is sealed itself, so a load can name an altered file. The folder is written in a private temporary folder
(mode 0700) whose inode is checked before its files are digested and sealed, so a folder put in its place by someone
who can write the cache (docs/reproducibility.md#what-each-store-holds) is never sealed with the user's key.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from fixtures.artifacts import ArtifactCorrupt, write_sealed
from fixtures.populations import annotate_population
from fixtures.progress import stage
from fixtures.study import Study
from rankers.base import KEY_COLUMNS, strictly_greater
from rankers.fusion import fusion_ranking
from rankers.scorers.ce_recipe import Recipe, TrainGroups
from rankers.scorers.ce_store import MANIFEST, model_digests
from rankers.scorers.cross_encoder import CrossEncoderScorer
from rankers.window import WINDOW_K, window_inputs, window_rerank


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


def evaluate_on_development(scorer: CrossEncoderScorer, study: Study, dev_pool: pd.DataFrame, label: str) -> dict[str, float]:
    """``dev_evaluation`` as a progress stage whose closing line carries the development metrics."""
    with stage(f"cross-encoder development evaluation ({label})", None, "inputs") as s:
        ev = dev_evaluation(scorer, study, dev_pool)
        s.update(ev["inputs"])
        s.name += (f": window strict {ev['window_strict']:.4f}, MRR {ev['window_mrr']:.4f}, "
                   f"pair strict {ev['pair_strict']:.4f}, window loss {ev['window_loss']:.4f}")
    return ev


@dataclass
class TrainingRun:
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


def fit(model, tokenizer, groups: TrainGroups, study: Study, dev_pool: pd.DataFrame, recipe: Recipe, seed: int,
         name: str) -> TrainingRun:
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
              **_curve_point(evaluate_on_development(evaluator, study, dev_pool, "step 0, untrained"))}]
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
            ev = evaluate_on_development(evaluator, study, dev_pool, f"step {step}, train loss {train_loss:.4f}")
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
    return TrainingRun(curve, step, best[1], best[2], time.perf_counter() - started, eval_seconds)


def save(model, tokenizer, run: TrainingRun, train_directions: int, study: Study, dev_pool: pd.DataFrame, recipe: Recipe,
          seed: int, identity: dict, ident: str, name: str, description: str, out: Path) -> None:
    """The selected checkpoint, its development evaluation (fp32 and int8) and a sealed manifest, moved into ``out``."""
    model.load_state_dict(run.best_state)
    model.eval()
    tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.", suffix=".tmp", dir=out.parent))  # 0700: this user's alone
    made = os.lstat(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    selected = {}
    for quant in (False, True):
        scorer = CrossEncoderScorer(tmp, max_length=recipe.max_length, batch_size=64, device="cpu",
                                    dtype="float32", int8=quant)
        selected["int8" if quant else "fp32"] = evaluate_on_development(scorer, study, dev_pool,
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
        "files": model_digests(_same_folder(tmp, made)),
    }
    text = json.dumps(manifest, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_sealed(_same_folder(tmp, made) / MANIFEST, lambda p: p.write_text(text, encoding="utf-8"))
    tmp.chmod(os.stat(out.parent).st_mode & 0o755)  # sealed: readable as its folder is (a team cache), ours to write
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def _same_folder(path: Path, made: os.stat_result) -> Path:
    """``path`` while it is still the private folder made (same device and inode, not a link); else ``ArtifactCorrupt``
    (another folder was moved into its place during training: nothing of it is sealed)."""
    now = os.lstat(path)
    if (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino) or not stat.S_ISDIR(now.st_mode):
        raise ArtifactCorrupt(path, None, None, "cross-encoder training folder",
                              "was replaced while the model was trained: refused, nothing sealed")
    return path


def _curve_point(ev: dict[str, float]) -> dict[str, float]:
    return {k: ev[k] for k in ("window_strict", "window_mrr", "pair_strict", "window_loss", "fusion_strict")}


def _json_default(obj: object) -> object:
    return obj.item() if isinstance(obj, (np.floating, np.integer)) else str(obj)
