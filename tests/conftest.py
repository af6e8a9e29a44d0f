"""The unit tests run offline: nothing they load may come from a model hub (the embedded models are local files)."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
