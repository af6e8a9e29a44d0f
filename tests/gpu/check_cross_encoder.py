"""GPU check of the paper profile's cross-encoder path (and a probe of the vLLM grader path).

Run from the repository root on a CUDA machine: ``PYTHONPATH=. python3 tests/gpu/check_cross_encoder.py --model DIR
[--cpu-only] [--rows N]`` (DIR: a cross-encoder folder, e.g. the fine-tuned one under the cache's
``models/cross-encoder/``; the device needs only torch, transformers, numpy and pandas). Measured on an H200 in
docs/benchmarks.md (GPU check).
It scores NevIR Test inputs (per row: q1 with doc1 and doc2, q2 with doc1 and doc2) through the project's own
``rankers.scorers.cross_encoder.CrossEncoderScorer`` on CUDA FP16, CUDA FP32 (and BF16) and on CPU FP32 as the
reference, and compares scores, orderings and the strict-preference outcome of each direction (the preferred
passage's score strictly above its counterpart's: q1 prefers doc1, q2 prefers doc2). Results go to
``$OUT/gpu_check.json`` (or ``--out``). ``--cpu-only`` runs the same code with CPU FP32 against CPU BF16.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT: dict = {"ok": False, "errors": []}


def fail(out: Path, message: str, code: int = 2) -> None:
    """Stop with a clear message, still writing what was gathered."""
    print(f"CHECK FAILED: {message}", flush=True)
    RESULT["errors"].append(message)
    write(out)
    sys.exit(code)


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(RESULT, indent=2, default=str) + "\n")


def default_model() -> Path:
    """A cross-encoder folder copied beside this script (``model-trained``), the one the H200 check used."""
    if (HERE / "model-trained" / "config.json").exists():
        return HERE / "model-trained"
    raise FileNotFoundError(f"no model folder under {HERE}: pass --model DIR")


def load_inputs(rows: int) -> tuple[list[tuple[str, str]], list[str]]:
    path = Path("data/nevir/test.jsonl")
    inputs, ids = [], []
    with path.open() as fh:
        for i, line in enumerate(fh):
            if i >= rows:
                break
            r = json.loads(line)
            inputs += [(r["q1"], r["doc1"]), (r["q1"], r["doc2"]), (r["q2"], r["doc1"]), (r["q2"], r["doc2"])]
            ids.append(str(r["id"]))
    return inputs, ids


def outcomes(scores):
    """Strict preference per direction, in order (row0-q1, row0-q2, row1-q1, ...), plus the margins."""
    import numpy as np

    s = np.asarray(scores).reshape(-1, 4)
    margins = np.stack([s[:, 0] - s[:, 1], s[:, 3] - s[:, 2]], axis=1).reshape(-1)
    return margins > 0, margins


def spearman(a, b) -> float:
    import numpy as np
    import pandas as pd

    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    return float(np.corrcoef(ra, rb)[0, 1])


def pair_concordance(a, b, n_sample: int = 200_000, seed: int = 0) -> float:
    """Share of randomly drawn input pairs (i, j) that both score vectors order the same way (ties count as apart)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(a), n_sample)
    j = rng.integers(0, len(a), n_sample)
    keep = i != j
    return float(np.mean(np.sign(a[i[keep]] - a[j[keep]]) == np.sign(b[i[keep]] - b[j[keep]])))


def trained_max_length(model: Path) -> int:
    """The trained cross-encoder's own max_length (its manifest's recipe), else the scorer's default 512."""
    manifest = model / "manifest.json"
    return int(json.loads(manifest.read_text())["recipe"]["max_length"]) if manifest.exists() else 512


def measure(name: str, model: Path, device: str, dtype: str, inputs, repeats: int, batch_size: int = 64,
            max_length: int = 512) -> dict:
    """Load, warm up, score all inputs ``repeats`` times through the project's scorer; times and scores."""
    import numpy as np
    import torch

    from rankers.scorers.cross_encoder import CrossEncoderScorer

    t0 = time.perf_counter()
    scorer = CrossEncoderScorer(model, max_length=max_length, batch_size=batch_size, device=device, dtype=dtype)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scorer.score(inputs[:batch_size])  # warm-up: CUDA context, kernels, allocator
    warm_s = time.perf_counter() - t0
    runs, seconds = [], []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = scorer.score(inputs)
        seconds.append(time.perf_counter() - t0)  # score() copies results to the host: synchronized
        runs.append(batch.scores)
    scores = runs[0]
    rep_diff = max((float(np.max(np.abs(r - scores))) for r in runs[1:]), default=0.0)
    wall = float(np.median(seconds))
    entry = {"name": name, "device": device, "dtype": dtype, "batch_size": batch_size, "model_key": scorer.model_key,
             "param_dtype": str(next(scorer.model.parameters()).dtype), "load_s": round(load_s, 3),
             "warmup_s": round(warm_s, 3), "seconds": [round(s, 4) for s in seconds],
             "inputs_per_s": round(len(inputs) / wall, 1), "repeat_max_abs_diff": rep_diff,
             "n_errors": int(sum(e is not None for e in batch.errors)),
             "nonfinite": int(np.sum(~np.isfinite(scores))),
             "mean_input_tokens": float(np.mean([u["input_tokens"] for u in batch.usage])),
             "n_truncated": int(sum(u["truncated"] for u in batch.usage))}
    if device.startswith("cuda"):
        entry["cuda_max_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    print(f"  {name:>22}: {entry['inputs_per_s']:>9.1f} inputs/s (median of {repeats}, batch {batch_size}), "
          f"load {load_s:.2f}s, warm-up {warm_s:.2f}s, repeat diff {rep_diff:.3g}", flush=True)
    print(f"  {'':>22}  model_key {scorer.model_key}", flush=True)
    del scorer
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return entry, scores


def compare(name: str, scores, ref, ref_name: str) -> dict:
    import numpy as np

    got_o, got_m = outcomes(scores)
    ref_o, ref_m = outcomes(ref)
    diff = np.abs(scores - ref)
    flips = np.flatnonzero(got_o != ref_o)
    entry = {"vs": ref_name, "max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
             "max_abs_diff_over_score_range": float(diff.max() / max(np.ptp(ref), 1e-12)),
             "margin_max_abs_diff": float(np.abs(got_m - ref_m).max()),
             "spearman": spearman(scores, ref), "pair_concordance": pair_concordance(scores, ref),
             "outcome_agreement": float(np.mean(got_o == ref_o)), "outcome_disagreements": int(len(flips)),
             "disagreeing_directions": [{"direction": int(i), "margin": float(got_m[i]), "ref_margin": float(ref_m[i])}
                                        for i in flips[:20]]}
    print(f"  {name:>22} vs {ref_name}: max|d| {entry['max_abs_diff']:.3g} (mean {entry['mean_abs_diff']:.3g}, "
          f"{entry['max_abs_diff_over_score_range']:.2e} of range), spearman {entry['spearman']:.6f}, "
          f"pair concordance {entry['pair_concordance']:.5f}, outcome agreement {entry['outcome_agreement']:.5f} "
          f"({len(flips)} of {len(got_o)} directions differ)", flush=True)
    return entry


def summary(scores) -> dict:
    import numpy as np

    o, m = outcomes(scores)
    pairs = o.reshape(-1, 2).all(axis=1)
    return {"strict_preference": float(o.mean()), "pairwise_accuracy": float(pairs.mean()),
            "ties": int(np.sum(m == 0)), "score_min": float(np.min(scores)), "score_max": float(np.max(scores)),
            "smallest_abs_margin": float(np.min(np.abs(m)))}


def probe_vllm() -> dict:
    """Whether the paper's grader path can run here: vLLM importable, and what the project's backend says."""
    entry: dict = {}
    try:
        import vllm  # noqa: F401

        entry["vllm_import"] = f"ok {getattr(vllm, '__version__', '?')}"
    except Exception as exc:  # noqa: BLE001 - any import failure is the finding
        entry["vllm_import"] = f"{type(exc).__name__}: {exc}"
    try:
        from rankers.scorers.llm import make_backend
        from rankers.scorers.llm.generation import BackendUnavailable

        backend = make_backend("vllm", model="Qwen/Qwen3-14B-AWQ")
        entry["backend_model_key"] = backend.model_key
        if entry["vllm_import"].startswith("ok"):
            entry["backend"] = "vllm importable; no model weights reachable offline here, generation not attempted"
        else:
            try:
                backend._ensure_llm()
                entry["backend"] = "unexpected: vLLM engine started"
            except BackendUnavailable as exc:
                entry["backend"] = f"BackendUnavailable: {exc}"
    except Exception as exc:  # noqa: BLE001
        entry["backend"] = f"{type(exc).__name__}: {exc}"
    print(f"vLLM: import -> {entry['vllm_import']}\n      project backend -> {entry.get('backend')}", flush=True)
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cpu-only", action="store_true", help="no CUDA: CPU FP32 against CPU BF16 (a dry run)")
    ap.add_argument("--rows", type=int, default=1383, help="NevIR Test rows (4 inputs each)")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    args = ap.parse_args()
    out = args.out

    try:
        import numpy as np
        import torch
        import transformers
    except ImportError as exc:
        fail(out, f"missing package on this machine: {exc}")
    RESULT["env"] = {"python": platform.python_version(), "torch": torch.__version__,
                     "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
                     "numpy": np.__version__, "cuda_available": torch.cuda.is_available(),
                     "cpu_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        RESULT["env"].update(device_name=torch.cuda.get_device_name(0), capability=f"{p.major}.{p.minor}",
                             gpu_memory_gib=round(p.total_memory / 2**30, 1), cudnn=torch.backends.cudnn.version())
    print("env:", json.dumps(RESULT["env"]), flush=True)
    try:
        from rankers.scorers.cross_encoder import CrossEncoderScorer  # noqa: F401
    except ImportError as exc:
        traceback.print_exc()
        fail(out, f"the project's cross-encoder module does not import here (missing package?): {exc}")
    if not args.cpu_only and not torch.cuda.is_available():
        fail(out, "torch sees no CUDA device; pass --cpu-only for a dry run")

    RESULT["vllm"] = probe_vllm()

    model = args.model or default_model()
    inputs, ids = load_inputs(args.rows)
    max_length = trained_max_length(model)
    RESULT["model_folder"], RESULT["max_length"] = str(model), max_length
    RESULT["n_inputs"], RESULT["n_directions"] = len(inputs), 2 * len(ids)
    print(f"model {model}; {len(inputs)} inputs, {2 * len(ids)} directions from {len(ids)} NevIR Test rows",
          flush=True)

    if args.cpu_only:
        plan = [("cpu-fp32", "cpu", "float32", 1, 64), ("cpu-bf16", "cpu", "bfloat16", 1, 64)]
    else:
        plan = [("cpu-fp32", "cpu", "float32", 1, 64), ("cuda-fp32", "cuda", "float32", args.repeats, 64),
                ("cuda-fp16", "cuda", "float16", args.repeats, 64), ("cuda-bf16", "cuda", "bfloat16", args.repeats, 64),
                ("cuda-fp16-batch256", "cuda", "float16", args.repeats, 256)]
    RESULT["configs"], scores = {}, {}
    print("throughput:", flush=True)
    for name, device, dtype, repeats, batch in plan:
        try:
            RESULT["configs"][name], scores[name] = measure(name, model, device, dtype, inputs, repeats, batch,
                                                            max_length)
        except Exception as exc:  # noqa: BLE001 - report and go on with the other configurations
            traceback.print_exc()
            RESULT["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
    if "cpu-fp32" not in scores:
        fail(out, "the CPU FP32 reference could not be computed")
    for name, s in scores.items():
        RESULT["configs"][name]["outcomes"] = summary(s)
    print("agreement (strict preference = preferred score > counterpart score, per direction):", flush=True)
    RESULT["comparisons"] = {}
    others = [n for n in scores if n != "cpu-fp32"]
    for name in others:
        RESULT["comparisons"][f"{name}~cpu-fp32"] = compare(name, scores[name], scores["cpu-fp32"], "cpu-fp32")
    if "cuda-fp16" in scores and "cuda-fp32" in scores:
        RESULT["comparisons"]["cuda-fp16~cuda-fp32"] = compare("cuda-fp16", scores["cuda-fp16"], scores["cuda-fp32"],
                                                              "cuda-fp32")
    if "cuda-fp16" in scores and "cuda-fp16-batch256" in scores:
        RESULT["comparisons"]["cuda-fp16-batch256~cuda-fp16"] = compare(
            "cuda-fp16-batch256", scores["cuda-fp16-batch256"], scores["cuda-fp16"], "cuda-fp16")
    print("outcomes per configuration:", flush=True)
    for name in scores:
        o = RESULT["configs"][name]["outcomes"]
        print(f"  {name:>22}: strict preference {o['strict_preference']:.4f}, pairwise accuracy "
              f"{o['pairwise_accuracy']:.4f}, exact ties {o['ties']}, smallest |margin| {o['smallest_abs_margin']:.3g}",
              flush=True)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "scores.npy", np.stack([scores[n] for n in scores]))
    RESULT["scores_npy_rows"] = list(scores)
    RESULT["ok"] = not RESULT["errors"]
    write(out)
    print(f"wrote {out / 'gpu_check.json'} (ok={RESULT['ok']})", flush=True)


if __name__ == "__main__":
    main()
