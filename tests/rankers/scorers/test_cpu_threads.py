"""The grader's thread count: the cores other work leaves free, read from /proc/stat less this process's own time."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rankers.scorers.llm.cpu_threads import PROBE_EVERY, FreeCores, ThreadChooser, busy_ticks, free_count, usable_cores

STAT = """cpu  300 10 60 900 5 0 2 3 0 0
cpu0 100 0 20 400 2 0 1 1 0 0
cpu1 200 10 40 500 3 0 1 2 0 0
intr 1 2 3
"""


def test_busy_ticks_sum_user_nice_system_irq_softirq_and_steal_of_the_given_cores_only():
    assert busy_ticks(STAT, [0]) == 100 + 20 + 1 + 1
    assert busy_ticks(STAT, [1]) == 200 + 10 + 40 + 1 + 2  # niced work counts: it still takes the core
    assert busy_ticks(STAT, [0, 1]) == 122 + 253
    assert busy_ticks(STAT, [0, 2]) is None  # a core without a line: nothing to measure


@pytest.mark.parametrize(("other", "free"), [(0.0, 2), (0.49, 2), (0.5, 1), (1.0, 1), (1.49, 1), (1.5, 1),
                                             (2.0, 1), (-0.2, 2)])
def test_a_core_other_work_uses_half_of_the_time_or_more_is_taken_and_one_core_always_remains(other, free):
    assert free_count(2, other * 100, 100) == free


def test_the_count_is_over_the_interval_since_the_last_long_enough_sample():
    now, own, busy = [0.0], [0.0], [0]
    tick = os.sysconf("SC_CLK_TCK")

    def stat() -> str:
        per = busy[0] // 2
        return f"cpu0 {per} 0 0 0 0 0 0 0\ncpu1 {busy[0] - per} 0 0 0 0 0 0 0\n"

    cores = FreeCores(min_interval_s=0.5, read_stat=stat, clock=lambda: now[0], own=lambda: own[0])
    cores.cores = [0, 1]
    assert cores() == 2  # no interval yet: every core counts free
    now[0], busy[0], own[0] = 1.0, int(1.8 * tick), 0.8 * tick  # others used one core of the two over 1 s
    assert cores() == 1
    now[0], busy[0] = 1.2, busy[0] + int(0.4 * tick)  # too short an interval: the last count stands
    assert cores() == 1
    now[0], own[0] = 2.0, own[0] + 0.4 * tick  # since t=1 s: only this process worked
    assert cores() == 2


def test_an_unreadable_proc_stat_counts_every_usable_core_free():
    def unreadable() -> str:
        raise FileNotFoundError("/proc/stat")

    cores = FreeCores(read_stat=unreadable)
    assert cores() == cores() == len(usable_cores())


def test_a_quiet_machine_runs_on_every_core_without_trying_fewer():
    chooser = ThreadChooser(free=lambda: 4, cores=4)
    for _ in range(3 * PROBE_EVERY):
        assert chooser() == 4
        chooser.observe(4, 100, 1.0)


def _judge(chooser: ThreadChooser, speed: dict[int, float], prompts: int) -> list[int]:
    """The counts the chooser picks over ``prompts`` prompts of 100 tokens judged at ``speed[threads]`` tokens/s."""
    picked = []
    for _ in range(prompts):
        threads = chooser()
        picked.append(threads)
        chooser.observe(threads, 100, 100 / speed[threads])
    return picked


def test_beside_other_work_the_faster_count_judges_and_the_other_is_tried_again_now_and_then():
    free = [1]
    chooser = ThreadChooser(free=lambda: free[0], cores=2)
    picked = _judge(chooser, {1: 300.0, 2: 150.0}, 4 * PROBE_EVERY)  # a busy core: one thread is faster
    assert picked[:2] == [1, 2]  # each count measured once
    assert picked[2:].count(2) == len(picked) // PROBE_EVERY  # then one probe in PROBE_EVERY prompts
    assert chooser.rate(1) == pytest.approx(300.0) and chooser.rate(2) == pytest.approx(150.0)
    picked = _judge(chooser, {1: 300.0, 2: 500.0}, 4 * PROBE_EVERY)  # the load changed: two threads now win
    assert picked[-PROBE_EVERY:].count(2) == PROBE_EVERY - 1  # switched at the first probe of the new speed
    free[0] = 2  # nothing else runs: every core, no probe
    assert _judge(chooser, {1: 300.0, 2: 500.0}, 2 * PROBE_EVERY) == [2] * 2 * PROBE_EVERY


_SPIN = "import sys\nprint('spinning', flush=True)\nwhile True:\n    pass\n"


@pytest.mark.skipif(not os.path.exists("/proc/stat") or len(usable_cores()) < 2, reason="needs Linux and 2 cores")
def test_a_spinning_process_takes_a_core_from_the_count():
    """A process we start spins on one of our cores; over an interval in which it spins (it said so before the
    interval began) and this process sleeps, at least that core is counted taken."""
    cores = FreeCores(min_interval_s=0.3)
    spinner = subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        cores()  # the interval starts once the spinner runs
        time.sleep(0.4)  # an interval longer than min_interval_s, not a timing assertion
        assert cores() <= len(cores.cores) - 1
    finally:
        spinner.kill()
        spinner.wait()
