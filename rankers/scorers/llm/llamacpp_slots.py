"""The llama.cpp backend's prompts with several data slots: the listwise and pairwise judges.

``SlotJudging`` is mixed into ``rankers.scorers.llm.llamacpp_backend.LlamaCppBackend``, whose loaded model, chunked
evaluation and caches it uses: the same chunking rule as the grader's, for any number of slots, so a cached
prefix of whole chunks gives the logits of an evaluation from scratch (``docs/protocol.md#listwise``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rankers.scorers.llm.generation import Generation, settings_key
from rankers.scorers.llm.llamacpp_text import (Decoded, answer_probs, each_prompt, render_chat_template, split_once,
                                               token_text)
from rankers.scorers.prompts.slots import SlotPrompt


class SlotJudging:
    """Prompts with several data slots, judged on the backend's model (mixed into ``LlamaCppBackend``)."""

    def key_with(self, scheme: Mapping[str, object]) -> str:
        """The model file's identity under another use's reading ``scheme`` (a judge other than the grader)."""
        return (f"llamacpp:{self.model_path.name}@sha256:{self.revision[:16]}|"
                f"{settings_key({'n_batch': self.N_BATCH, 'data': 'plain-text', **scheme})}")

    def slot_frame(self, prompt: SlotPrompt) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
        """The trusted token runs around the prompt's data slots, and the slots in order.

        Rendered through the GGUF's chat template once per layout (the trusted text), with one mark per
        slot occurrence; trusted text is tokenized with special tokens, as in :meth:`frame`.
        """
        llm = self.load()
        layout = prompt.layout()
        if layout in self._slot_frames:
            return self._slot_frames[layout]
        source = llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise ValueError(f"{self.model_path.name} has no chat template (tokenizer.chat_template)")
        slots = tuple(slot for _, slot in prompt.pieces if slot is not None)
        marks = [f"\ue000{k}\ue001" for k in range(len(slots))]
        user, k = "", 0
        for text, slot in prompt.pieces:
            if slot is None:
                user += text
            else:
                user += marks[k]
                k += 1
        rest = render_chat_template(source, [{"role": "system", "content": prompt.system},
                                              {"role": "user", "content": user}],
                                     bos_token=token_text(llm, llm.token_bos()),
                                     eos_token=token_text(llm, llm.token_eos()))
        texts = []
        for mark in marks:
            before, rest = split_once(rest, mark, self.model_path.name)
            texts.append(before)
        texts.append(rest)
        runs = [tuple(llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)) if t else () for t in texts]
        bos = llm.token_bos()
        if llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" and bos >= 0 and runs[0][:1] != (bos,):
            runs[0] = (bos, *runs[0])
        self._slot_frames[layout] = (tuple(runs), slots)
        return self._slot_frames[layout]

    def slot_chunks(self, prompt: SlotPrompt) -> tuple[list[tuple[int, ...]], bool]:
        """The prompt's evaluation chunks and whether data was cut to its budget.

        The same rule as the grader's three chunks, for any number of slots: [trusted text up to the first
        slot] [first slot's data] [trusted text + next slot's data] ... with the trailing trusted text (the
        assistant header) in the last chunk. Boundaries depend on the prompt alone, so a cached prefix of
        whole chunks gives the logits of an evaluation from scratch.
        """
        runs, slots = self.slot_frame(prompt)
        llm = self._llm
        data, ids, cut = prompt.escaped(), {}, False
        for slot in dict.fromkeys(slots):
            tokens = llm.tokenize(data[slot].encode("utf-8"), add_bos=False, special=False) if data[slot] else []
            budget = prompt.budget(slot)
            cut |= len(tokens) > budget
            ids[slot] = tuple(tokens[:budget])
        chunks = [runs[0]] + [(runs[k] if k else ()) + ids[slot] for k, slot in enumerate(slots)]
        chunks[-1] = chunks[-1] + runs[-1]
        return chunks, cut

    def _fit(self, prompts: Sequence[SlotPrompt], extra: int = 0) -> None:
        """Load a context large enough for the longest prompt (data at full budget) plus ``extra`` tokens."""
        need = 0
        for p in prompts:
            runs, slots = self.slot_frame(p)
            need = max(need, sum(map(len, runs)) + sum(p.budget(s) for s in slots) + extra)
        self.load(need)

    def choose(self, prompts: Sequence[SlotPrompt], choices: Sequence[str],
               done: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        """For each prompt, the answer among ``choices`` (each one token) read from their logits at the answer
        position, with their probabilities (softmax restricted to the choices; the first on an exact tie)."""
        if not prompts:
            return []
        self._fit(prompts)
        key = tuple(choices)
        if key not in self._choice_ids:
            ids = [self._llm.tokenize(c.encode(), add_bos=False, special=False) for c in choices]
            if any(len(i) != 1 for i in ids):
                raise ValueError(f"{self.model_path.name}: answers {list(choices)} are not single tokens ({ids})")
            self._choice_ids[key] = [i[0] for i in ids]

        def read(logits: np.ndarray, run: Decoded) -> Generation:
            probs, mass = answer_probs(logits, self._choice_ids[key])
            return Generation(choices[int(np.argmax(probs))], run.prompt_tokens, 0, run.seconds(), truncated=run.cut,
                              choice_probs=tuple(float(p) for p in probs),
                              extra={"processed_tokens": float(run.processed), "choice_mass": mass})

        return each_prompt(prompts, lambda prompt: self._decode(lambda: self.slot_chunks(prompt), read), done)

    def complete(self, prompts: Sequence[SlotPrompt],
                 done: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        """Greedy generation after each prompt, up to ``settings.output_cap`` tokens or an end-of-generation
        token (the listwise judge's permutation). Temperature 0: the argmax token at every step."""
        if not prompts:
            return []
        cap = self.settings.output_cap
        self._fit(prompts, extra=cap)
        llm = self._llm
        llama_cpp = self._import_llama()
        vocab = llm._model.vocab

        def read(logits: np.ndarray, run: Decoded) -> Generation:
            tokens: list[int] = []
            stopped = False
            while len(tokens) < cap:
                token = int(np.argmax(logits))
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    stopped = True
                    break
                tokens.append(token)
                if len(tokens) == cap:
                    break
                llm.eval([token])
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            text = llm.detokenize(tokens).decode("utf-8", errors="replace")
            return Generation(text, run.prompt_tokens, len(tokens), run.seconds(), truncated=run.cut,
                              extra={"processed_tokens": float(run.processed), "stopped": 1.0 if stopped else 0.0})

        return each_prompt(prompts, lambda prompt: self._decode(lambda: self.slot_chunks(prompt), read), done)
