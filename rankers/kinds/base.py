"""What a ranker kind is: one object that knows everything about itself, and the registry of kinds by name.

A kind (``kind = "..."`` in a profile's ``[rankers.<name>]`` table) declares its option
schema, checks option values when the profile is read, checks what must answer before any work
(``preflight``: models, files and factories it names exist; ``contact``: a declared server
``url`` answers), says what this machine must have to
run it (``requirements``: a package, a CUDA device; the specs skip its rows with that reason
when something is missing), builds its ranking or its judgments from a :class:`Context`, and
names its identity for memos and caches: the code it runs (``fixtures.code``: its module and
everything that module imports, never a hand list) and the inputs it reads.

Two shapes, one base class each:

- :class:`PoolKind`: orders every query's full pool (``rank``); memoized under ``memo_key``,
  so a warm run reads the ranking instead of recomputing it;
- :class:`WindowKind`: reorders the reference's top-20 window by the window rule
  (``rankers.window``) from text judgments it makes with ``judge``: one score per (query,
  passage) input, cached under a key the kind names. ``rankers.kinds.pointwise.PointwiseKind`` judges each
  input on its own through the shared score cache; a kind that judges a whole ordered window or pairs
  of passages overrides ``judge`` and names its own cache key (see ``docs/protocol.md#listwise``).

The harness looks kinds up by name (``rankers.kinds.kind``) and never branches on one. What a machine must
have is in ``rankers.kinds.requirements``, what judging will cost in ``rankers.kinds.plan``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from fixtures.code import code_identity
from fixtures.datasets.pairs import DataDecl
from fixtures.models import model_problem
from fixtures.study import Study
from rankers.base import Ranking
from rankers.kinds.plan import JudgePlan
from rankers.kinds.requirements import CUDA, Requirement, needs_splits
from rankers.scorers.base import TextScorer

#: A declaration's population when it is evaluated on every eligible direction.
ALL = "all"
#: Markers a declaration may carry: pytest marks that select or skip its specs.
MARKS = ("llm", "gpu", "slow")
MODES = ("window", "designated")
#: How a model value that can only be a local path starts (the rule of ``fixtures.models.model_location``).
PATH_STARTS = ("/", "~", ".")

_registry: dict[str, RankerKind] = {}


class DeclarationError(ValueError):
    """A ranker declaration is malformed; the message names where (file and table) and the key."""


class KindBuildError(RuntimeError):
    """A declared ranker could not be built; the message names the declaration."""


# ---- the declaration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RankerDecl:
    """One declared ranker. ``options`` are its kind's own settings, exactly as declared; ``kind`` names its kind
    and ``ranker_kind`` is that kind (what it checks, needs and computes).

    ``baseline`` is the ranker its Δ and claims are against (profile key ``compare_to``), restricted to
    the same directions; ``reference`` is whose top 20 a window ranker reorders; ``tie_breaker`` whose
    score breaks text-score ties.
    """

    name: str
    kind: str
    ranker_kind: RankerKind = field(compare=False, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    population: str = ALL
    order: float = 1000.0
    marks: tuple[str, ...] = ()
    baseline: str | None = "fusion"
    reference: str | None = None
    tie_breaker: str | None = None
    mode: str = "window"
    #: The profile's dataset (``[data]``): a ranker that trains on splits it lacks does not apply to it.
    data: DataDecl = field(default_factory=DataDecl, compare=False, repr=False)

    @property
    def is_window(self) -> bool:
        return self.ranker_kind.is_window(self.options)

    @property
    def scorer_options(self) -> dict[str, Any]:
        """The options that make its judgments (what a twin declaration must share to share them)."""
        return self.ranker_kind.scorer_options(self.options)

    @property
    def designated_only(self) -> bool:
        return self.is_window and self.mode == "designated"

    @property
    def max_score(self) -> float | None:
        return self.ranker_kind.max_score

    @property
    def reading(self) -> str:
        """How a judgment becomes the window rule's score (``"score"``; a grader's ``"argmax"`` or ``"expected"``)."""
        return self.ranker_kind.reading(self.options)

    def requirements(self) -> tuple[Requirement, ...]:
        """What it needs to run: its kind's needs, CUDA when declared with ``marks = ["gpu"]``, and the dataset's
        splits it trains on."""
        trains_on = self.ranker_kind.trains_on(self.options)
        return (*self.ranker_kind.requirements(self.options), *((CUDA,) if "gpu" in self.marks else ()),
                *((needs_splits(self.data, trains_on),) if trains_on else ()))


# ---- what a kind reads -------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a kind may read to build a ranking or judgments; the session computes each part once.

    ``study`` is the data (directions, splits, corpora, provenance); the rest are functions, so a
    kind that needs nothing of a split never builds it (its pool, its population, another
    ranker's ranking), and a kind's tests can hand-build a context with only what the kind reads.
    ``cache(*parts)`` is a folder under the run's cache directory; ``shared(key, build)`` one object
    per key for the session; ``memo(label, key, compute)`` a value kept on disk under a content key;
    ``stage(split, name)`` times a stage for the run manifest; ``where(decl)`` names a declaration's
    file and table in messages.
    """

    study: Study
    pool: Callable[[str], pd.DataFrame]
    pool_digest: Callable[[str], str]
    population: Callable[[str], pd.DataFrame]
    queries: Callable[[str], dict[str, str]]
    ranking: Callable[[str, str], Ranking]
    ranking_key: Callable[[str, str], dict[str, Any] | None]
    resolve_path: Callable[[str], Path]
    cache: Callable[..., Path]
    shared: Callable[[tuple, Callable[[], Any]], Any]
    memo: Callable[[str, object, Callable[[], Any]], Any]
    forget: Callable[[str, object], None]
    stage: Callable[..., AbstractContextManager[dict[str, Any]]]
    where: Callable[[RankerDecl], str]
    seed: int
    subset: bool
    #: Whether the study's trained models and judgments shipped in the checkout may stand in for training them
    #: (``rankers.shipped``; False under ``--retrain``).
    shipped: bool = True


# ---- kinds ---------------------------------------------------------------------------------------


class RankerKind:
    """A ranker kind: option schema, checks, requirements, identity; a subclass says how it ranks or judges."""

    name: ClassVar[str]
    #: Option name -> accepted Python types (TOML values); ``required`` must be present and non-empty.
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    #: A bounded integer score scale (the grader's 0-4): double-max counts and the tie-branch claims apply.
    max_score: ClassVar[float | None] = None
    doc: ClassVar[str] = ""
    #: Whether its rankers can reorder a window (``is_window`` decides for one declaration's options).
    window: ClassVar[bool] = False
    #: Whether each (query, passage) is judged on its own, so a passage's score does not depend on which other
    #: passages are judged with it: then a designated-mode ranker equals its windowed twin and pair-only (L1) reads
    #: the window's very scores. False for listwise and pairwise judges.
    pointwise: ClassVar[bool] = False

    def is_window(self, options: Mapping[str, Any]) -> bool:
        return self.window

    def check(self, options: Mapping[str, Any], where: str) -> None:
        """Values the types alone do not rule out; raise ``DeclarationError`` naming ``where`` and the key."""

    def contact(self, options: Mapping[str, Any], where: str) -> None:
        """What must answer before any work (run once per session, before pools and training): by default a
        declared ``url`` is well-formed and its server answers HTTP. Raise ``DeclarationError`` naming ``where``.

        Cheap by contract (a request or two with a short timeout, no model load): it runs for every
        declaration, also when every score is cached.
        """
        url = options.get("url")
        if not url:
            return
        from rankers.scorers.http import base_urls, check_reachable  # http client only when a server is declared

        try:
            for one in base_urls(url, f"{self.name} server"):  # every endpoint of a list
                check_reachable(one, what=f"{self.name} server")
        except ValueError as exc:
            raise DeclarationError(f"{where}: {exc}") from None

    def requirements(self, options: Mapping[str, Any]) -> tuple[Requirement, ...]:
        return ()

    def trains_on(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The dataset splits it is trained on (and stops on); a dataset without them makes it not applicable."""
        return ()

    def paths(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """Options naming a file or folder: the profile makes them absolute against the file that sets them."""
        return ()

    def models(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """Options naming a model (a hub name or a local folder, relative to the profile file that sets it)."""
        return ()

    def preflight(self, options: Mapping[str, Any], splits: Sequence[str]) -> list[str]:
        """What would stop this declaration once work started, found before any (a few seconds at most).

        By default every model it names is resolved (``fixtures.models.model_problem``: a local
        folder exists, or a hub name is cached or answers one request); a kind adds its own
        checks (a file per split, an importable factory). Each problem is one sentence.
        """
        problems = (model_problem(str(options[key]), self.name) for key in self.models(options) if options.get(key))
        return [p for p in problems if p is not None]

    def preflight_data(self, options: Mapping[str, Any], splits: Sequence[str], study: Callable[[], Study]
                       ) -> list[str]:
        """What the declaration's own files hold that the run's data rules out (a run file's qids of another split),
        found before any work once ``preflight`` found the files; ``study()`` loads the data, once for every kind
        that asks. Each problem is one sentence naming the file and line."""
        return []

    def scorer_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return dict(options)

    def reading(self, options: Mapping[str, Any]) -> str:
        """How a judgment becomes a score; twins that share judgments differ only in this."""
        return "score"

    def code(self) -> dict[str, object]:
        """The code part of every key this kind names: its module and everything it imports."""
        return code_identity(type(self).__module__)

    # Full-pool kinds
    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        raise NotImplementedError(f"kind {self.name!r} does not order full pools")

    def seeds(self, options: Mapping[str, Any], base_seed: int) -> tuple[int, ...]:
        """Training seeds of a learned ranker, the run's own first (``docs/statistics.md#seeds``); () when untrained."""
        return ()

    def rank_seed(self, decl: RankerDecl, ctx: Context, split: str, seed: int, perturbed: bool = False) -> Ranking:
        """The ranking of the model trained with ``seed`` (one of ``seeds``); ``rank`` is the run's own seed's.
        ``perturbed``: trained on pools whose route scores carry floating-point noise
        (``docs/statistics.md#perturbation``)."""
        raise NotImplementedError(f"kind {self.name!r} is not trained with seeds")

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any] | None:
        """Everything the ranking of ``split`` depends on besides the declaration; None: never memoized."""
        return None

    # Window kinds
    def judge(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]], desc: str) -> Any:
        raise NotImplementedError(f"kind {self.name!r} makes no text judgments")

    def identity(self, decl: RankerDecl, ctx: Context) -> dict[str, Any]:
        raise NotImplementedError(f"kind {self.name!r} makes no text judgments")

    def read(self, decl: RankerDecl, scored: Any) -> dict[tuple[str, str], float]:
        """(qid, pid) -> the score the window rule reads from this declaration's judgments."""
        return scored.scores

    def plan(self, decl: RankerDecl, ctx: Context, inputs: Sequence[tuple[str, str, str, str]]) -> JudgePlan | None:
        """What judging ``inputs`` will cost, before any judgment (an LLM judge's; None: the kind plans nothing)."""
        return None

    def scorer(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        raise NotImplementedError(f"kind {self.name!r} has no text scorer")


def contact_all(decls: Iterable[RankerDecl], where: Callable[[RankerDecl], str]) -> dict[str, str]:
    """Each declaration's ``contact``, run side by side (one slow server costs its timeout once); returns the
    message of each that failed, by ranker name."""
    decls = list(decls)

    def run(decl: RankerDecl) -> str | None:
        try:
            decl.ranker_kind.contact(decl.options, where(decl))
        except DeclarationError as exc:
            return str(exc)
        except Exception as exc:  # any failure of a declared ranker's check is reported against its declaration
            return f"{where(decl)}: server check failed: {type(exc).__name__}: {exc}"
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(decls)))) as pool:
        results = list(pool.map(run, decls))
    return {d.name: message for d, message in zip(decls, results) if message is not None}


class PoolKind(RankerKind):
    """Orders every query's full pool; memoized by default under the pool, the data and the kind's code."""

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any] | None:
        return {"pool": ctx.pool_digest(split), "data": ctx.study.data_provenance(), **self.code()}


class WindowKind(RankerKind):
    """Reorders the reference's window from text judgments (``judge``); the window rule does the rest."""

    window = True

    def judge_key(self, decl: RankerDecl, ctx: Context) -> str | None:
        """The key the score store holds this declaration's judgments under, known without its server (None: the
        kind cannot tell, or plans nothing): a judge whose server does not answer is judged from the store alone
        when it holds them (docs/protocol.md#batch-files)."""
        return None


def score_store(ctx: Context):
    """The run's one score store (``rankers.scorers.store``), shared by every kind that judges and by the session."""
    from rankers.scorers.cache import ScoreCache  # sqlite store, no model

    return ctx.shared(("score-cache",), lambda: ScoreCache.in_folder(ctx.cache("scores")))


class LazyScorer:
    """A declared scorer known by its cache key; anything else (``score``, ``sort_key``) builds the real one."""

    def __init__(self, model_key: str, build: Callable[[], Any], forget: Callable[[], None]) -> None:
        self.model_key = model_key
        self._build = build
        self._forget = forget

    def __getattr__(self, name: str) -> Any:
        real = self._build()
        if real.model_key != self.model_key:  # e.g. weights replaced in place: never mix their scores
            self._forget()
            raise RuntimeError(f"the scorer's cache key changed from {self.model_key!r} to {real.model_key!r} "
                               "although its declared identity did not; the remembered key is forgotten, rerun")
        return getattr(real, name)


def missing_model_paths(options: Mapping[str, Any], what: str) -> list[str]:
    """Each option named ``model`` or ``*_model`` whose value can only be a path (``PATH_STARTS``) and names nothing,
    as one sentence: handed to a library as it is, such a value would be looked up as a name on a model hub and
    fail there, far from the declaration. ``options`` are a factory's keywords, which it receives as written, so a
    relative path is read from the working directory, as the factory would read it."""
    problems = []
    for key, value in options.items():
        if (key == "model" or key.endswith("_model")) and isinstance(value, str) and value.startswith(PATH_STARTS):
            path = Path(value).expanduser().absolute()
            if not path.exists():
                problems.append(f"{what} option {key} = {value!r} is a path, and {path} does not exist (a value "
                                "starting with /, ~ or . is a local model, never a hub name; the factory reads a "
                                "relative path from the working directory)")
    return problems


# ---- the registry --------------------------------------------------------------------------------


def register(kind: RankerKind) -> RankerKind:
    """Make a kind known by its name (each module of ``rankers.kinds`` registers its own; a test may add one)."""
    if kind.name in _registry and type(_registry[kind.name]) is not type(kind):
        raise ValueError(f"kind {kind.name!r} is registered twice: {type(_registry[kind.name]).__qualname__} and "
                         f"{type(kind).__qualname__}")
    _registry[kind.name] = kind
    return kind


def registered() -> Iterator[RankerKind]:
    return iter(list(_registry.values()))
