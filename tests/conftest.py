"""The unit tests run offline: nothing they load may come from a model hub (the embedded models are local files)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# A test run with a home folder of its own still reads the warm shared cache's memos: it authenticates them with
# this user's memo key (harness.memo), not a new one made under that home.
from harness.memo import KEY_ENV, memo_key_path  # noqa: E402
from tests.support.empty_cache_run import EmptyCacheRuns, run_on_empty_cache  # noqa: E402

os.environ.setdefault(KEY_ENV, str(memo_key_path()))


@pytest.fixture(scope="session")
def empty_cache_runs(tmp_path_factory: pytest.TempPathFactory) -> EmptyCacheRuns:
    """README step 3 on an empty cache, run once for the tests that read it (``tests.support.empty_cache_run``)."""
    return run_on_empty_cache(tmp_path_factory.mktemp("empty-cache"))
