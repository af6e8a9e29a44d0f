"""What a profile may say: its tables and keys, and the measures, gates and pins it may name.

Read by the profile reader (``harness.profile_file``), the declarations (``harness.profile``) and
the checks they feed; the measure vocabularies come from the one registry, ``reports.measures``
(docs/architecture.md, "Where a new measure goes").
"""
from __future__ import annotations

import re
from pathlib import Path

from rankers.declarations import NAME_MAX, PORTABLE_NAME
from reports.measures import PAIRED_MEASURES, TABLE2, column
from reports.columns import COUNT, POPULATION

PROFILE_DIR = Path(__file__).resolve().parent.parent / "specs" / "profiles"
TOP_LEVEL = ("profile", "data", "models", "samples", "rankers", "claims", "gates", "pins", "margins")
PROFILE_KEYS = ("name", "description", "extends", "pythonpath", "inherit_checks")
MODEL_KEYS = ("dense", "sparse")
#: ``[data]``: the dataset a run evaluates (docs/protocol.md#your-own-contrastive-pairs); ``dir`` is kind nevir's,
#: ``pairs`` (a JSONL, CSV or Parquet file, or a saved Hugging Face dataset's folder), ``corpus`` and ``group_field``
#: kind pairs' (files relative to the profile that sets them).
DATA_KEYS = ("kind", "name", "description", "dir", "pairs", "corpus", "reference", "group_field")
SAMPLE_KEYS = ("directions", "seed", "description", "design", "sequential", "batch", "budget")
#: A sequential sample's budget (docs/statistics.md#sequential-samples): it stops when any one is spent.
BUDGET_KEYS = ("judgments", "tokens", "seconds", "max_directions")
EXPECTATIONS = ("holds", "fails")
#: Comparison claims a profile declares itself (H1-style): ranker vs versus on a measure.
COMPARISON_KEYS = ("family", "ranker", "versus", "measure", "direction", "text")
CLAIM_KEYS = (*COMPARISON_KEYS, "expect", "reason", "subset_expect", "subset_reason")
#: Measures a comparison claim may name: the paired measures of the claimable Table II columns (reports.measures).
MEASURES = tuple(m.name for m in PAIRED_MEASURES if any(column(c).claimable for c in m.columns))
#: Profile-wide gates (``[gates]``, docs/statistics.md#gates): the pool's coverage, every window ranker's fallback.
GATES = ("coverage_pct_min", "fallback_pct_max")
#: Quality gates: the Table II column each one floors; only per ranker, since no floor suits every ranker.
QUALITY_GATES = {f"{m.name}_min": m.name for m in TABLE2 if m.floored}
#: Gates one ranker's ``[gates.<ranker>]`` table sets (its fallback_pct_max overrides the profile-wide one).
RANKER_GATES = ("fallback_pct_max", *QUALITY_GATES)
#: Table II columns a pin may name.
PIN_MEASURES = tuple(m.name for m in TABLE2 if m.pinnable)
PIN_KEYS = ("tolerance",)
#: Default tolerance of a pinned rate or mean: the rounding of the six decimals it is written with (a count is exact).
ROUNDING = {m.name: 5e-7 for m in TABLE2 if m.pinnable and m.unit not in (COUNT, POPULATION)}
#: Keys a ``like = "<other>"`` declaration does not inherit: its own identity and place.
LIKE_SKIPS = ("label", "order", "enabled", "like")
#: Keys whose values are prose, which may break lines; every other string is a name, label, path or identifier.
FREE_TEXT = ("description", "text", "reason", "subset_reason")
#: The longest label (a Table II row, a figure's legend, a page title: ``[profile] name``, a ranker's ``label``) and
#: the longest prose a profile may write, in characters: checked when the file is read, since every table, figure
#: and page draws them (a 5 MB label once kept publishing busy for 17 minutes).
LABEL_MAX = 200
TEXT_MAX = 4000
LENGTH_LIMITS = {"name": LABEL_MAX, "label": LABEL_MAX, **{key: TEXT_MAX for key in FREE_TEXT}}
#: The longest string any other key of the profile's own tables may hold (a kind, model, URL, path, factory), and the
#: longest a ``python`` ranker's own options may hold (a factory may take an inline text), in characters: a 5 MB
#: option value was accepted and carried into every key and manifest.
VALUE_MAX = TEXT_MAX
OPTION_VALUE_MAX = 1 << 16
#: Every key a profile writes is a name (a ranker's, a sample's, an option's, a measure's, a run scope's) and, like a
#: ranker's name (``rankers.declarations.PORTABLE_NAME``), made of POSIX's portable file-name characters, at most
#: ``NAME_MAX`` of them: names reach file names, CSV columns and the terminal in any locale (a sample named ``s€中``
#: crashed two specs under a Latin-1 locale). A claim's name may add ``@<split>`` and is longer, since it holds a
#: ranker's name: at most ``CLAIM_NAME_MAX``.
CLAIM_NAME_MAX = 3 * NAME_MAX
CLAIM_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._@-]{{0,{CLAIM_NAME_MAX - 1}}}")
NAMES = {"claims": CLAIM_NAME}
#: Tables whose keys are checked where they are declared instead: ranker names (``rankers.declarations``).
NAMED_ELSEWHERE = ("rankers",)
KEY_NAME = PORTABLE_NAME
#: The most rankers a profile may declare (enabled, after ``extends``): every spec is parametrized over them, so
#: each one adds tests to every run; the shipped profiles declare about 15.
MAX_RANKERS = 64
#: Unicode categories no name or label may hold: control (a NUL byte fails far later, as "embedded null byte",
#: without naming its declaration), format (bidirectional overrides, zero-width characters) and line separators.
UNPRINTABLE = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")
