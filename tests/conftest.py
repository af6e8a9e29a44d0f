"""The unit tests run offline: nothing they load may come from a model hub (the embedded models are local files)."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# A test run with a home folder of its own still reads the warm shared cache's memos: it authenticates them with
# this user's memo key (harness.memo), not a new one made under that home.
from harness.memo import KEY_ENV, memo_key_path  # noqa: E402

os.environ.setdefault(KEY_ENV, str(memo_key_path()))
