"""How many CPU threads the embedded grader should use now, chosen again before every prompt.

llama.cpp splits every operation of a decode call over its threads and waits for the slowest at the end of each
operation. A thread that shares its core with another process runs a fraction of the time, and the other threads
wait for it at every operation: beside other work two grader threads judged 0.07-0.2 passages/s against 0.45/s on
quiet cores (docs/benchmarks.md#the-grader-beside-other-work), where one thread on the free core keeps the speed
of a core. But on a machine loaded past its cores a process's share of them grows with its threads, and there two
threads measured faster than one. Neither rule wins everywhere, so ``ThreadChooser`` measures: one thread per free
core (``FreeCores``) and every usable core are the counts worth trying, a quiet machine (they agree) runs on every
core, and otherwise the count that judged faster over its last prompts judges. The logits do not depend on the
thread count (``LlamaCppBackend``'s docstring, tested), so changing it between prompts changes no grade.

What counts as taken: the CPU time of everything but this process over the last interval, from ``/proc/stat``
(user, nice, system, irq, softirq and steal ticks of the cores this process may run on) less this process's own
CPU time. Niced work counts too: a lower-priority process still runs whenever a grader thread sleeps at an
operation's end, and the thread that wakes then waits for it (the collapse above was measured beside niced work).
Where ``/proc/stat`` cannot be read (not Linux), every core this process may use counts as free.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The columns of a ``/proc/stat`` cpu line that are work (user nice system idle iowait irq softirq steal ...).
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
#: A core is taken when other work used at least this share of it over the interval: a core busy half of the time
#: would make every operation wait for the thread that shares it.
TAKEN_SHARE = 0.5
#: Shortest interval a new count is computed over: ``/proc/stat`` counts in ticks of 10 ms, so 0.5 s gives a
#: core's usage to within 2%.
MIN_INTERVAL_S = 0.5
PROC_STAT = Path("/proc/stat")


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity; all of them where the platform cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def busy_ticks(stat_text: str, cores: Sequence[int]) -> int | None:
    """Ticks of work (every process's) on ``cores`` since boot, from the text of ``/proc/stat``; None when a core
    has no line (a core that went offline)."""
    lines = {}
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            lines[int(name[3:])] = rest.split()
    if any(c not in lines for c in cores):
        return None
    return sum(int(lines[c][i]) for c in cores for i in _BUSY_COLUMNS if i < len(lines[c]))


def own_ticks() -> float:
    """This process's CPU time (every thread, user and system) in ``/proc/stat`` ticks."""
    times = os.times()
    return (times.user + times.system) * os.sysconf("SC_CLK_TCK")


def free_count(cores: int, other_ticks: float, interval_ticks: float) -> int:
    """Cores free for this process: those of ``cores`` other work did not take (at least one: the grader always
    runs)."""
    other = max(0.0, other_ticks) / interval_ticks if interval_ticks > 0 else 0.0
    taken = int(other + 1 - TAKEN_SHARE)  # whole cores of other work, a share >= TAKEN_SHARE counting as one
    return max(1, min(cores, cores - taken))


@dataclass
class _Sample:
    """One reading: when, every process's work on our cores, and this process's own (ticks)."""

    at: float
    busy: int
    own: float


class FreeCores:
    """The number of cores other work leaves free, measured over the interval since the previous count.

    ``__call__`` is cheap (two small reads) and may be called between every two prompts: it keeps the last count
    until at least ``min_interval_s`` have passed, so the usage it reads is over an interval long enough for the
    tick counters. The first call has no interval yet and counts every usable core free.
    """

    def __init__(self, min_interval_s: float = MIN_INTERVAL_S, read_stat: Callable[[], str] | None = None,
                 clock: Callable[[], float] = time.monotonic, own: Callable[[], float] = own_ticks) -> None:
        self.cores = usable_cores()
        self.min_interval_s = min_interval_s
        self._read = read_stat or self._proc_stat
        self._clock = clock
        self._own = own
        self._last: _Sample | None = None
        self._count = len(self.cores)

    @staticmethod
    def _proc_stat() -> str:
        return PROC_STAT.read_text()

    def _sample(self) -> _Sample | None:
        try:
            busy = busy_ticks(self._read(), self.cores)
        except OSError:  # no /proc (not Linux): nothing to measure
            return None
        return None if busy is None else _Sample(self._clock(), busy, self._own())

    def __call__(self) -> int:
        """Free cores now (the count of the last interval long enough to measure)."""
        if self._last is not None and self._clock() - self._last.at < self.min_interval_s:
            return self._count
        now = self._sample()
        if now is None:
            self._last, self._count = None, len(self.cores)
            return self._count
        if self._last is not None:
            interval_ticks = (now.at - self._last.at) * os.sysconf("SC_CLK_TCK")
            other = (now.busy - self._last.busy) - (now.own - self._last.own)
            self._count = free_count(len(self.cores), other, interval_ticks)
        self._last = now
        return self._count


#: Weight of a prompt's speed in its thread count's rate (an exponential average): one probe of a count whose speed
#: moved by more than the gap between the two counts is enough to switch to it.
RATE_WEIGHT = 0.5
#: Every this many prompts, one runs on the count that is not the faster, so its rate follows the machine's load.
PROBE_EVERY = 6


class ThreadChooser:
    """The thread count for the next prompt (``__call__``), learned from the speed of those judged (``observe``).

    The counts worth trying are one per free core and every usable core; when they agree (nothing else runs) that
    is the count, with no trial. Otherwise a count not yet measured is tried, then the one with the higher rate
    (processed tokens per second, averaged over its prompts with weight ``RATE_WEIGHT`` on the last) judges, and
    every ``PROBE_EVERY``-th prompt runs on the other. A probe costs at most one prompt in ``PROBE_EVERY`` at the
    slower count's speed.
    """

    def __init__(self, free: Callable[[], int] | None = None, cores: int | None = None) -> None:
        self.free = free or FreeCores()
        self.cores = cores or len(usable_cores())
        self._rates: dict[int, float] = {}
        self._calls = 0

    def rate(self, threads: int) -> float:
        """Processed tokens per second of the prompts judged on ``threads``, recent ones weighing most (0: none)."""
        return self._rates.get(threads, 0.0)

    def __call__(self) -> int:
        self._calls += 1
        candidates = sorted({min(self.free(), self.cores), self.cores})
        if len(candidates) == 1:
            return candidates[0]
        untried = [c for c in candidates if c not in self._rates]
        if untried:
            return untried[0]
        best = max(candidates, key=self.rate)
        if self._calls % PROBE_EVERY == 0:
            return next(c for c in candidates if c != best)
        return best

    def observe(self, threads: int, tokens: float, seconds: float) -> None:
        """A prompt judged on ``threads``: ``tokens`` evaluated in ``seconds``."""
        if tokens > 0 and seconds > 0:
            last = self._rates.get(threads, tokens / seconds)
            self._rates[threads] = (1 - RATE_WEIGHT) * last + RATE_WEIGHT * tokens / seconds
