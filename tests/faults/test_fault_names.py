"""Faults in names: hostile text in LaTeX output (failure 10) and run ids of processes started together (14)."""
from __future__ import annotations

import re
import subprocess
import sys
import time

import pandas as pd

from fixtures.settings import PROJECT_ROOT
from reports.history import run_id
from reports.measures import TABLE2_ROW_COLUMNS
from reports.render import table2_latex

HOSTILE = "a&b%c#d$e_{}~^\\"


def _unescaped(tex: str) -> str:
    """``tex`` with every escape of a special character removed: what is left is LaTeX syntax."""
    return re.sub(r"\\(textbackslash|textasciitilde|textasciicircum)\{\}|\\[&%$#_{}]", "", tex)


def test_table2_tex_escapes_every_special_character_in_names_and_caption() -> None:
    """`a&b%c#d$e` was written raw, and a profile name with `%` commented out the caption's closing brace."""
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": HOSTILE, "n": 10, "strict_pct": 30.0, "paired_pct": 20.0, "mrr": 0.5, "pref_at_1": 30.0,
                "ties": 1, "delta_pts": 1.0, "delta_lo": 0.5, "delta_hi": 1.5})
    tex = table2_latex(pd.DataFrame([row]), "test", f"mine{HOSTILE}", f"abc{HOSTILE}")
    escaped = r"a\&b\%c\#d\$e\_\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}"
    body = tex.split(r"\midrule")[1]
    assert body.lstrip().startswith(escaped + " & 10 &")
    caption = next(line for line in tex.splitlines() if line.startswith(r"\caption{"))
    assert f"profile mine{escaped}, commit abc{escaped})" in caption and caption.endswith("directions.}")
    rest = _unescaped(tex)
    assert not re.search(r"[#_~^]", rest.replace(r"\$\Delta\$", "")), rest  # no raw special character is left
    assert "%" not in rest.replace(r"\%", "") and rest.count("&") == tex.count("&") - tex.count(r"\&")
    assert _unescaped(caption).count("{") == _unescaped(caption).count("}")  # the caption closes


SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from reports.history import run_id
start = {start!r}
while time.time() < start:
    pass
print(run_id({{}}))
"""


def test_run_ids_are_unique_across_processes_started_together() -> None:
    """Two processes started together got the same run id (a timestamp to the second)."""
    assert run_id({}) != run_id({})
    start = time.time() + 3  # both processes spin until the same instant, then take their id
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=str(PROJECT_ROOT), start=start)],
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    ids = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(ids) and len(set(ids)) == len(ids), ids
    assert all(re.fullmatch(r"\d{8}T\d{6}[.\d]*Z-[A-Za-z0-9_.+-]+", i) for i in ids)  # sortable by time, readable
