"""The embedded CPU grader: llama.cpp in-process on a GGUF file, the grade read from five logits.

The same backend judges prompts with several data slots (listwise, pairwise: ``llamacpp_slots``); the chat
template, token texts and answer probabilities are in ``llamacpp_text``.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fixtures import progress
from fixtures.artifacts import sha256_file
from rankers.scorers.causes import exception_cause
from rankers.scorers.http import error_text
from rankers.scorers.llm.cpu_threads import ThreadChooser
from rankers.scorers.llm.generation import GRADE_TOKENS, BackendUnavailable, Generation, GenerationSettings
from rankers.scorers.llm.llamacpp_slots import SlotJudging
from rankers.scorers.llm.llamacpp_text import (Decoded, answer_probs, each_prompt, render_chat_template,
                                               split_once, token_text)
from rankers.scorers.prompts import GradePrompt, PromptTemplate

# llama.cpp's OpenMP threads spin while waiting by default; on a shared CPU (more runnable threads
# than cores) that made 2 threads 6x slower than 1 (37 vs 220 prompt tok/s measured for SmolLM2).
# Passive waiting keeps the speed of the free cores. OpenMP reads it once, when the first OpenMP
# runtime loads (torch's libgomp, which llama.cpp then shares, or llama.cpp's own): the root
# conftest sets it before torch can load, and this module sets it before it imports llama_cpp, for
# use outside pytest. An explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class PromptTooLong(ValueError):
    """A prompt (after the data budgets) does not fit the context."""


@dataclass(frozen=True)
class _Frame:
    """A prompt template rendered through the model's chat template, tokenized around its slots."""

    head: tuple[int, ...]            # everything before the first data slot (system, tags), trusted
    first: str                       # the first data slot's name
    middle: tuple[int, ...]          # template text between the two slots
    second: str
    tail: tuple[int, ...]            # after the second slot, through the assistant header


class LlamaCppBackend(SlotJudging):
    """The embedded CPU grader: the grade is read from the five grade-token logits, never generated.

    For each input the backend builds the chat prompt itself from the GGUF's chat template (so
    no free generation, no sampler, no stop strings): template text is tokenized with special
    tokens, data as plain text (a passage containing ``<|im_start|>`` stays text), each data slot
    cut to its token budget. The prompt is evaluated in three fixed chunks,

        [template up to the first slot] [first slot's data] [middle + second slot's data + tail]

    and the answer is read at the last position: ``grade_probs`` is the softmax of the five logits
    of ``"0"``..``"4"`` (restricted to those five), the grade their argmax (the lower grade on an
    exact tie).

    Why fixed chunks: llama.cpp's CPU kernels are not batch-invariant. With repacked K-quant
    weights (``REPACK`` builds, the Qwen2.5 Q4_K_M grader) the rows of a decode call are processed in
    groups by one kernel and the remainder by another, so a token's logits depend on where its decode
    call began and ended (measured on a 284-token prompt: split at token 100 or not split, identical
    logits; split at 50 or 247, logits moved by up to 0.37). ``create_chat_completion`` reused the
    KV prefix of the previous
    prompt and evaluated the rest from the first differing token: the chunking, hence the logits,
    depended on which prompt came before (order, batch, process). Here the chunk boundaries are a
    function of the prompt alone, and a cached prefix is reused only in whole chunks that were
    evaluated as exactly these chunks, so reuse is bit-identical to evaluating from scratch (tested).
    The thread count does not change the logits (each output element is one thread's dot product;
    tested with 1 and 2 threads, and with the count changed between prompts), so unless ``n_threads`` fixes it, it
    is chosen again before each prompt (``cpu_threads.ThreadChooser``: every core on a quiet machine; beside other
    work, one per free core or every core, whichever judged faster), which keeps the grader's speed beside other
    work (docs/benchmarks.md#the-grader-beside-other-work). Across CPUs with other SIMD features the kernels differ
    and so do the last bits of the logits; the grader records the margin and flags near-ties for that reason.

    Of the settings, ``thinking`` must be false or unset and ``temperature`` 0; ``max_tokens``,
    ``logprobs``, ``concurrency`` and ``timeout_s`` do not apply (nothing is generated, and one
    context evaluates the prompts in sequence).
    """

    #: Tokens per decode call (n_batch = n_ubatch): a chunk longer than this is split at multiples of
    #: it from the chunk's own start, so the split, too, depends on the chunk alone.
    N_BATCH = 512
    #: Context: the longest prompt the default budgets allow is ~1,600 tokens; a larger one reloads.
    MIN_CONTEXT = 2048
    CONTEXT_STEP = 512

    def __init__(self, model_path: str | Path, *, settings: GenerationSettings | None = None,
                 revision: str | None = None, n_threads: int | None = None, reuse_prefix: bool = True,
                 thread_chooser: ThreadChooser | None = None) -> None:
        self.settings = settings or GenerationSettings(thinking=False)
        if self.settings.thinking:
            raise ValueError("the llamacpp grader reads the grade from the answer position's logits and cannot think; "
                             "set thinking = false (or leave it unset)")
        if self.settings.temperature != 0:
            raise ValueError(f"the llamacpp grader takes the argmax of the grade-token logits (temperature 0); "
                             f"got temperature {self.settings.temperature}")
        self.model_path = Path(model_path)
        #: A fixed thread count, or None: chosen before each prompt (``thread_chooser``, by default
        #: ``cpu_threads.ThreadChooser``) from the free cores and the speed measured on each count.
        self.n_threads = n_threads
        self._chooser = None if n_threads else (thread_chooser or ThreadChooser())
        self._threads = n_threads or 0  # the loaded context's thread count
        self.reuse_prefix = reuse_prefix
        self._revision = revision
        self._llm: Any = None
        self._n_ctx = 0
        self._grade_ids: list[int] = []
        self._frames: dict[str, _Frame] = {}
        self._cached: list[tuple[int, ...]] = []  # the chunks whose KV the context holds, in order
        self._slot_frames: dict[tuple, tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]] = {}
        self._choice_ids: dict[tuple[str, ...], list[int]] = {}

    @property
    def revision(self) -> str:
        """The GGUF's sha256 (computed once when not given): the file, not its path, identifies the model."""
        if self._revision is None:
            if not self.model_path.is_file():
                raise BackendUnavailable(f"llamacpp backend: model file not found: {self.model_path}")
            self._revision = sha256_file(self.model_path)
        return self._revision

    @property
    def model_key(self) -> str:
        """The model file's identity under the grader's reading: grade logits 0-4, prompts cut head|slot1|rest."""
        return self.key_with({"grade": "logits0-4", "chunks": "head|slot1|rest"})

    @property
    def chunk_size(self) -> int:
        return 32

    @staticmethod
    def _import_llama() -> Any:
        try:
            import llama_cpp  # heavy: native runtime, only when grading on the CPU
        except ImportError as exc:
            raise BackendUnavailable(
                f"llamacpp backend needs llama-cpp-python (pip install llama-cpp-python): {exc}") from exc
        return llama_cpp

    def load(self, n_ctx: int | None = None) -> Any:
        """The loaded ``llama_cpp.Llama`` with at least ``n_ctx`` tokens of context."""
        need = max(self.MIN_CONTEXT, -(-(n_ctx or 0) // self.CONTEXT_STEP) * self.CONTEXT_STEP)
        if self._llm is not None and need <= self._n_ctx:
            return self._llm
        llama_cpp = self._import_llama()
        if not self.model_path.is_file():
            raise BackendUnavailable(f"llamacpp backend: model file not found: {self.model_path}")
        if self._llm is not None:
            self._llm.close()  # release the old context before allocating a larger one
        threads = self.n_threads or self._chooser()
        self._llm = llama_cpp.Llama(model_path=str(self.model_path), n_ctx=need, n_batch=self.N_BATCH,
                                    n_ubatch=self.N_BATCH, n_threads=threads, n_threads_batch=threads,
                                    seed=self.settings.seed, logits_all=False, verbose=False)
        self._n_ctx = need
        self._threads = threads
        self._cached = []
        self._frames = {}
        self._slot_frames = {}
        self._choice_ids = {}
        self._grade_ids = []
        for digit in GRADE_TOKENS:
            ids = self._llm.tokenize(digit.encode(), add_bos=False, special=False)
            if len(ids) != 1:
                raise ValueError(f"{self.model_path.name}: grade {digit!r} is not a single token ({ids}); "
                                 f"the llamacpp grader reads one logit per grade")
            self._grade_ids.append(ids[0])
        return self._llm

    def frame(self, template: PromptTemplate) -> _Frame:
        """``template`` rendered through the GGUF's chat template and tokenized around its two slots."""
        llm = self.load()
        if template.key in self._frames:
            return self._frames[template.key]
        source = llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise ValueError(f"{self.model_path.name} has no chat template (tokenizer.chat_template); "
                             f"the llamacpp grader builds its prompt from it")
        marks = {slot: f"\ue000{slot}\ue001" for slot in template.slot_order}
        user = "".join(text if slot is None else marks[slot] for text, slot in template.pieces())
        rendered = render_chat_template(source, [{"role": "system", "content": template.system},
                                                  {"role": "user", "content": user}],
                                         bos_token=token_text(llm, llm.token_bos()),
                                         eos_token=token_text(llm, llm.token_eos()))
        first, second = template.slot_order
        head, rest = split_once(rendered, marks[first], self.model_path.name)
        middle, tail = split_once(rest, marks[second], self.model_path.name)

        def tok(text: str) -> tuple[int, ...]:
            return tuple(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else ()

        head_ids = tok(head)
        bos = llm.token_bos()
        if llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" and bos >= 0 and head_ids[:1] != (bos,):
            head_ids = (bos, *head_ids)
        frame = _Frame(head_ids, first, tok(middle), second, tok(tail))
        self._frames[template.key] = frame
        return frame

    def chunks(self, prompt: GradePrompt) -> tuple[list[tuple[int, ...]], bool]:
        """The prompt's three evaluation chunks (see the class docstring) and whether data was cut."""
        frame = self.frame(prompt.template)
        llm = self._llm
        data = prompt.data()
        cut = False
        slots = {}
        for slot in (frame.first, frame.second):
            ids = llm.tokenize(data[slot].encode("utf-8"), add_bos=False, special=False) if data[slot] else []
            budget = prompt.budget(slot)
            cut |= len(ids) > budget
            slots[slot] = tuple(ids[:budget])
        return [frame.head, slots[frame.first], frame.middle + slots[frame.second] + frame.tail], cut

    def generate(self, prompts: Sequence[GradePrompt],
                 done: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        """One grade per prompt, in order; ``done(i, generation)`` as each is read (docs/protocol.md#judging-cost)."""
        if not prompts:
            return []
        need = max(len(f.head) + len(f.middle) + len(f.tail) + p.query_tokens + p.passage_tokens
                   for p in prompts for f in [self.frame(p.template)])
        self.load(need)
        return each_prompt(prompts, self._one, done)

    def _one(self, prompt: GradePrompt) -> Generation:
        return self._decode(lambda: self.chunks(prompt), self._grade)

    def _grade(self, logits: np.ndarray, run: Decoded) -> Generation:
        probs, grade_mass = answer_probs(logits, self._grade_ids)
        return Generation(GRADE_TOKENS[int(np.argmax(probs))], run.prompt_tokens, 0, run.seconds(),
                          grade_probs=tuple(float(p) for p in probs), truncated=run.cut,
                          extra={"processed_tokens": float(run.processed), "grade_mass": grade_mass})

    def _decode(self, chunks_of: Callable[[], tuple[list[tuple[int, ...]], bool]],
                read: Callable[[np.ndarray, Decoded], Generation]) -> Generation:
        """One prompt judged: its chunks (``chunks_of()``) evaluated, the cached prefix reused, and the logits at its
        last position read into a generation (``read``), all under one guard: a failed decode is this prompt's
        unavailable judgment (``_failed``), a backend that is gone stops the run."""
        start = time.perf_counter()
        self._choose_threads()
        try:
            chunks, cut = chunks_of()
            with progress.waiting():
                logits, processed = self._evaluate(chunks)
                if self._chooser is not None:
                    self._chooser.observe(self._threads, processed, time.perf_counter() - start)
                return read(logits, Decoded(sum(map(len, chunks)), cut, processed, start))
        except BackendUnavailable:
            raise
        except (RuntimeError, ValueError) as exc:
            return self._failed(start, exc)

    @property
    def threads(self) -> int:
        """The thread count the loaded context evaluates with now (0 before the model is loaded)."""
        return self._threads

    def _choose_threads(self) -> None:
        """Set the context's thread count to the chooser's (``cpu_threads``), unless ``n_threads`` fixed it."""
        if self._chooser is None or self._llm is None:
            return
        threads = self._chooser()
        if threads != self._threads:
            self._import_llama().llama_set_n_threads(self._llm.ctx, threads, threads)
            self._threads = threads

    def _failed(self, start: float, exc: Exception) -> Generation:
        """A failed decode: this prompt is unavailable, not the run; the cached prefix, possibly half evaluated, is
        forgotten so the next prompt starts from its first chunk."""
        self._cached = []
        return Generation(None, None, None, time.perf_counter() - start, error_text(exc), cause=exception_cause(exc))

    def reset_prefix(self) -> None:
        """Forget the cached prefix: the next prompt is evaluated from its first chunk (timings, tests)."""
        self._cached = []

    def _evaluate(self, chunks: list[tuple[int, ...]]) -> tuple[np.ndarray, int]:
        """Logits at the last prompt position, evaluating only chunks the context does not already hold."""
        llm = self._llm
        total = sum(map(len, chunks))
        if total > self._n_ctx:
            raise PromptTooLong(f"prompt of {total} tokens exceeds the context of {self._n_ctx}")
        keep = 0
        if self.reuse_prefix:
            while keep < min(len(chunks) - 1, len(self._cached)) and self._cached[keep] == chunks[keep]:
                keep += 1  # the last chunk is always evaluated: its last position is the answer
        llm.n_tokens = sum(map(len, chunks[:keep]))  # llm.eval drops the KV cells from here on
        self._cached = list(chunks[:keep])
        processed = 0
        for chunk in chunks[keep:]:
            if chunk:
                llm.eval(chunk)
                processed += len(chunk)
            self._cached.append(chunk)
        llama_cpp = self._import_llama()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        return logits.copy(), processed
