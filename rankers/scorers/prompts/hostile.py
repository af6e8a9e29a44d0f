"""Chat-template control syntax inside untrusted data, neutralized for servers (``docs/protocol.md#grader``).

A server backend (an OpenAI-compatible server, in-process vLLM) renders chat messages with the
model's own template and tokenizes the result with special tokens enabled, so a passage holding
``<|im_end|>`` or ``[INST]`` would become a real control token there and could close its turn or
open a new one. :func:`escape_control` rewrites every control sequence of the template families a
server may apply (:data:`FAMILIES`) by replacing its brackets with look-alike characters —
``<`` ``>`` become ``‹`` ``›`` (U+2039, U+203A) and ``[`` ``]`` become ``⁅`` ``⁆`` (U+2045,
U+2046) — and leaves every other character as it was. The text stays readable to the model (the
tag is still spelled out), but no tokenizer can read it as the special token: the look-alikes are
their own characters under NFKC (unlike the fullwidth ``＜``, which normalizes back to ``<``), and
no normalizer strips them (unlike a zero-width joiner, which some do).

One function for every prompt that sends data to a server: the grader's prompts, and any
listwise or pairwise prompt, call it through ``rankers.scorers.prompts.escape_control``. The
in-process llama.cpp backend does not need it: it tokenizes data as plain text, so a control
string in data stays text there. :data:`ESCAPE_VERSION` names the rules; server backends put it
in their cache keys, because a rule change changes what the model reads.
"""
from __future__ import annotations

import re

#: Version of the rules below; enters the cache key of every backend that sends escaped data to a server.
ESCAPE_VERSION = "ctl2"
#: The control syntax of each template family, as regular expressions over the data.
FAMILIES: dict[str, str] = {
    # <|im_start|>, <|im_end|> (ChatML: Qwen, SmolLM, Yi); <|begin_of_text|>, <|start_header_id|>, <|eot_id|>
    # (Llama-3); <|user|>, <|end|> (Phi); any other <|...|>: every "<|" and "|>" wherever it stands.
    "chatml, llama-3, phi, generic <|...|>": r"<\||\|>",
    # <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>, <｜User｜>, <｜Assistant｜> (DeepSeek: fullwidth bars).
    "deepseek": r"<｜|｜>",
    # [INST], [/INST], [SYSTEM_PROMPT], [TOOL_CALLS], [AVAILABLE_TOOLS] (Llama-2, Mistral); <<SYS>>, <</SYS>>.
    "llama-2, mistral": r"\[/?[A-Z][A-Z_]+\]|<</?SYS>>",
    # <s>, </s>, <unk>, <pad>, <bos>, <eos> (SentencePiece and BPE sentence markers).
    "sentence markers": r"(?i:</?(?:s|unk|pad|bos|eos|mask|sep|cls)>)",
    # <start_of_turn>, <end_of_turn> (Gemma); <tool_call>, <tool_response> and any <word_word...> tag.
    "gemma, underscore tags": r"</?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+>",
    # <think>, </think>, <tools> (Qwen3 and Hermes-style reasoning and tool tags).
    "reasoning and tool tags": r"(?i:</?(?:think|tools)>)",
}
_CONTROL_RE = re.compile("|".join(f"(?:{pattern})" for pattern in FAMILIES.values()))
#: Each bracket of a control sequence and the look-alike that stands for it in data.
LOOK_ALIKES = str.maketrans({"<": "\u2039", ">": "\u203a", "[": "\u2045", "]": "\u2046"})


def escape_control(text: str) -> str:
    """``text`` with the brackets of every chat-control sequence (:data:`FAMILIES`) replaced by look-alikes."""
    return _CONTROL_RE.sub(lambda m: m.group(0).translate(LOOK_ALIKES), text)
