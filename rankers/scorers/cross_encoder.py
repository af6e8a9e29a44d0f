"""Cross-encoder text scorer (the paper's BGE role, ``docs/protocol.md#cross-encoder``).

Raw logits from a transformers sequence-classification head, one (query, passage)
input at a time as far as the model can tell: batching only pads inputs together,
it never lets one input see another. The paper runs ``BAAI/bge-reranker-v2-m3`` in
FP16 on a GPU (pass that name where the hub is reachable, or a downloaded folder); the
embedded CPU default is a checkpoint fine-tuned by ``rankers.scorers.ce_training``.

Logit policy: a single-logit model returns its logit. A two-logit model returns
``logit[1] - logit[0]``, the log-odds of the "relevant" class: it orders inputs
exactly as the softmax probability does, without squashing near-certain inputs into
ties at 1.0.

Throughput: a batch costs as much as its longest input, so the scorer sorts what it
is given by token length before batching. The cache driver helps by ordering all
inputs still to score by ``sort_key`` and handing them over ``chunk_size`` at a time:
each chunk then holds inputs of similar length, and an interrupted run loses at most
one chunk.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

from fixtures.models import hub_revision, model_fingerprint, require_model
from rankers.scorers.base import DeclaredKey, ScoreBatch

#: Bump whenever input construction changes (pair order, truncation, special tokens, logit policy).
PREPROCESSING_VERSION = "q-first|longest_first|logit-v1"
#: Accepted ``dtype`` values; "auto" is float16 on CUDA (the paper's FP16) and float32 elsewhere.
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: Inputs per ``score`` call from the cache driver: large enough that a length sort inside the chunk makes
#: batches of near-equal length, small enough that a killed run loses a few seconds of work. Padded over real
#: tokens on the 37,840 Train window inputs, driver sorted by ``sort_key``: 1.200 (chunks of 64), 1.029 (512),
#: 1.015 (1024), 1.008 (2048), 1.005 (4096); the old driver (64 per call in input order) padded 1.492.
CHUNK_SIZE = 2048


def resolve_dtype(dtype: str, device: torch.device) -> str:
    """The concrete dtype name for ``dtype`` ("auto" picks float16 on CUDA, float32 elsewhere)."""
    if dtype == "auto":
        return "float16" if device.type == "cuda" else "float32"
    if dtype not in DTYPES:
        raise ValueError(f"cross-encoder dtype {dtype!r} is not one of {['auto', *DTYPES]}")
    return dtype


def _hub_commit(name: str, revision: str | None) -> str:
    """The commit of the hub snapshot a model was just loaded from (a branch or tag name is not an identity)."""
    commit = hub_revision(name, revision)
    if commit is None:
        raise ValueError(f"cross-encoder {name!r}: loaded, but its hub commit cannot be found in the local Hugging "
                         "Face cache; pass a local folder so the weights can be identified")
    return commit


class CrossEncoderScorer(DeclaredKey):
    """Pointwise cross-encoder implementing ``TextScorer``.

    Inputs are tokenized as (query, passage) pairs truncated to ``max_length`` (the
    longer side loses tokens first, so the short NevIR query stays whole), sorted by
    length into batches of ``batch_size`` so padding stays small, and restored to the
    caller's order. ``dtype`` "auto" runs FP16 on CUDA and FP32 elsewhere; ``int8``
    applies dynamic int8 quantization to the linear layers (CPU only, on float32).
    ``model_key`` names everything that changes a score: model, revision (hub commit or
    weights digest), numerics (dtype or int8 engine), max_length and preprocessing.
    """

    def __init__(self, model_name_or_path: str | Path, max_length: int = 512, batch_size: int = 64,
                 device: str | None = None, revision: str | None = None, *, dtype: str = "auto",
                 int8: bool = False, chunk_size: int = CHUNK_SIZE) -> None:
        self.model_name = require_model(str(model_name_or_path), "cross-encoder")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.dtype = resolve_dtype(dtype, self.device)
        self.int8 = bool(int8)
        if self.int8 and self.device.type != "cpu":
            raise ValueError(f"cross-encoder {self.model_name}: dynamic int8 quantization runs on CPU only; "
                             f"pass device='cpu' or int8=False (device is {self.device})")
        if self.int8 and self.dtype != "float32":
            raise ValueError(f"cross-encoder {self.model_name}: int8 quantizes a float32 model; got dtype {self.dtype}")
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"cross-encoder {self.model_name}: device {self.device} asked for, but torch sees no CUDA "
                             f"device here (torch {torch.__version__}); pass device='cpu'")
        self._configure(max_length, batch_size, chunk_size)
        local = Path(self.model_name).expanduser()
        # A local folder is identified by the bytes loaded (digest taken now, not an in-process memo of it).
        digest = ("sha256:" + str(model_fingerprint.__wrapped__(str(local.resolve()))["files_sha256"])[:16]
                  if local.is_dir() else None)
        tokenizer = AutoTokenizer.from_pretrained(self.model_name, revision=revision)
        model = AutoModelForSequenceClassification.from_pretrained(self.model_name, revision=revision,
                                                                   dtype=DTYPES[self.dtype])
        self._attach(model, tokenizer)
        self.revision = digest or _hub_commit(self.model_name, revision)

    @classmethod
    def from_model(cls, model: torch.nn.Module, tokenizer, max_length: int, batch_size: int = 64,
                   name: str = "in-memory", revision: str = "in-memory") -> CrossEncoderScorer:
        """Wrap a model already in memory (e.g. mid-training evaluation) with the same input policy."""
        self = cls.__new__(cls)
        self.model_name = name
        self.device = next(model.parameters()).device
        self.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        self.int8 = False
        self._configure(max_length, batch_size, CHUNK_SIZE)
        self._attach(model, tokenizer)
        self.revision = revision
        return self

    def _configure(self, max_length: int, batch_size: int, chunk_size: int) -> None:
        for option, value in (("max_length", max_length), ("batch_size", batch_size), ("chunk_size", chunk_size)):
            if int(value) < 1:
                raise ValueError(f"cross-encoder {self.model_name}: {option} must be >= 1, got {value}")
        self.max_length, self.batch_size, self.chunk_size = int(max_length), int(batch_size), int(chunk_size)

    def _attach(self, model: torch.nn.Module, tokenizer) -> None:
        num_labels = model.config.num_labels
        if num_labels not in (1, 2):
            raise ValueError(f"{self.model_name}: expected a 1- or 2-logit classification head, got {num_labels}")
        self.num_labels = num_labels
        self.tokenizer = tokenizer
        model = model.eval()
        if self.int8:
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model.to(self.device)
        self.n_inputs = 0
        self.n_truncated = 0

    @property
    def numerics(self) -> str:
        """How the weights are computed with: the dtype, or int8 with its kernel engine (which changes scores)."""
        return f"int8-dynamic-{torch.backends.quantized.engine}" if self.int8 else self.dtype

    def key_parts(self) -> dict[str, str]:
        name = Path(self.model_name).name if Path(self.model_name).expanduser().is_dir() else self.model_name
        return {"judge": "cross-encoder", "model": name, "revision": str(self.revision), "numerics": self.numerics,
                "max_length": f"max{self.max_length}", "preprocessing": PREPROCESSING_VERSION}

    @staticmethod
    def sort_key(query: str, passage: str) -> int:
        """A free proxy of an input's token length (characters), for the cache driver's length sort."""
        return len(query) + len(passage)

    def tokenize(self, inputs: Sequence[tuple[str, str]]) -> tuple[list[list[int]], list[list[int]] | None, np.ndarray]:
        """Truncated ids (and token types) per input, plus each input's untruncated length.

        One untruncated pass serves both counting and the model; only inputs longer
        than ``max_length`` (none in NevIR at 352) are tokenized again with truncation.
        """
        queries = [q for q, _ in inputs]
        passages = [p for _, p in inputs]
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # over-long inputs are truncated below; the length warning is noise
        try:
            enc = self.tokenizer(queries, passages, truncation=False, return_attention_mask=False)
        finally:
            hf_logging.set_verbosity(verbosity)
        ids = list(enc["input_ids"])
        types = list(enc["token_type_ids"]) if "token_type_ids" in enc else None
        full_len = np.array([len(x) for x in ids])
        over = np.flatnonzero(full_len > self.max_length)
        if len(over):
            cut = self.tokenizer([queries[i] for i in over], [passages[i] for i in over],
                                 truncation="longest_first", max_length=self.max_length)
            for j, i in enumerate(over):
                ids[i] = cut["input_ids"][j]
                if types is not None:
                    types[i] = cut["token_type_ids"][j]
        return ids, types, full_len

    def pad(self, input_ids: list[list[int]], token_type_ids: list[list[int]] | None) -> dict[str, torch.Tensor]:
        """Right-pad one batch into tensors (numpy fill: cheaper than the tokenizer's per-row Python pad)."""
        width = max(len(x) for x in input_ids)
        ids = np.full((len(input_ids), width), self.tokenizer.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(input_ids), width), dtype=np.int64)
        for j, x in enumerate(input_ids):
            ids[j, :len(x)] = x
            mask[j, :len(x)] = 1
        batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
        if token_type_ids is not None:
            types = np.zeros((len(input_ids), width), dtype=np.int64)
            for j, x in enumerate(token_type_ids):
                types[j, :len(x)] = x
            batch["token_type_ids"] = torch.from_numpy(types)
        return {k: v.to(self.device) for k, v in batch.items()}

    @torch.inference_mode()
    def forward(self, input_ids: list[list[int]], token_type_ids: list[list[int]] | None) -> np.ndarray:
        """One padded batch through the model; returns the score per input (logit policy above)."""
        batch = self.pad(input_ids, token_type_ids)
        self.model.eval()
        logits = self.model(**batch).logits.float()
        out = logits[:, 0] if self.num_labels == 1 else logits[:, 1] - logits[:, 0]
        return out.cpu().numpy().astype(np.float64)

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        n = len(inputs)
        if n == 0:
            return ScoreBatch(np.zeros(0), [], [], [])
        ids, types, full_len = self.tokenize(inputs)
        lengths = np.array([len(x) for x in ids])
        order = np.argsort(-lengths, kind="stable")  # longest first: a memory failure shows up at once
        scores = np.empty(n, dtype=np.float64)
        seconds = np.empty(n, dtype=np.float64)
        for start in range(0, n, self.batch_size):
            chunk = order[start:start + self.batch_size]
            t0 = time.perf_counter()
            scores[chunk] = self.forward([ids[i] for i in chunk], None if types is None else [types[i] for i in chunk])
            seconds[chunk] = (time.perf_counter() - t0) / len(chunk)
        truncated = full_len > lengths
        self.n_inputs += n
        self.n_truncated += int(truncated.sum())
        errors = [None if np.isfinite(s) else "non-finite logit" for s in scores]
        usage = [{"input_tokens": float(lengths[i]), "full_tokens": float(full_len[i]),
                  "truncated": float(truncated[i]), "seconds": float(seconds[i])} for i in range(n)]
        return ScoreBatch(scores, errors, usage, [repr(float(s)) for s in scores])
