"""Whether the cache folder can hold what the run copies into it from the checkout, said before any work.

A run copies the shipped inputs it reads into its cache (docs/protocol.md#frozen-pools,
docs/protocol.md#shipped-reference): the frozen pool snapshots of ``data/pools/`` it evaluates or trains on, the
LambdaMART folders of ``data/reference/``, the cross-encoder's judgments (written into the score store). A cache on
a disk without room for them once failed mid-run (ENOSPC while copying a pool: a partial run with failed specs), so
``harness.options.resolve_before_work`` compares their size with the free space first and refuses the run in one
message naming the folder, what it lacks and what would be copied. Only what the cache does not hold yet counts,
so a warm run on a nearly full disk is not refused; the judgments count at their file's size, a lower bound of
their rows in the store.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from fixtures.pools import FROZEN_DIR, PoolFileError, _cache_path, make_routes, portable, shipped_manifest, \
    snapshot_identity
from fixtures.settings import PROJECT_ROOT, Settings
from fixtures.study import Study
from harness.profile_records import Profile
from rankers.declarations import RankerDecl
from rankers.shipped import SHIPPED_DIR

MB = 1024 * 1024


def route_model(profile: Profile, role: str) -> str | None:
    """The profile's declared route model (None: the built-in one), as the session resolves it."""
    name = profile.models.get(role, "")
    return None if not name or str(name).startswith("builtin:") else str(name)


def _size(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def _shown(path: Path) -> str:
    return path.relative_to(PROJECT_ROOT).as_posix() if path.is_relative_to(PROJECT_ROOT) else str(path)


def shipped_inputs(settings: Settings, profile: Profile, decls: Sequence[RankerDecl], study: Study,
                   frozen_dir: Path = FROZEN_DIR, shipped_dir: Path = SHIPPED_DIR) -> dict[str, int]:
    """Bytes of each shipped input this run will copy into its cache and the cache does not hold yet (by its
    checkout path): the frozen snapshot of a NevIR split it evaluates whole or trains on, whose identity is this run's
    (a subset's pool is its queries' rows, small); every LambdaMART folder when it computes one; the judgments of the
    trained cross-encoder when it computes that. ``study`` is NevIR's whole study (``fixtures.study.build_study``)."""
    nevir = profile.data.kind == "nevir"
    trains = any((nevir and d.ranker_kind.trains_on(d.options)) or d.options.get("train_on") == "nevir" for d in decls)
    splits = [s for s in settings.splits if nevir and not settings.subset_pairs]
    splits += ["train", "development"] if trains else []
    out: dict[str, int] = {}
    routes = make_routes(settings, route_model(profile, "dense"), route_model(profile, "sparse"))
    for split in dict.fromkeys(splits):
        manifest = Path(frozen_dir) / f"{split}.json"
        identity = snapshot_identity(study, split, routes)
        if not manifest.is_file() or _cache_path(settings, split, identity).exists():
            continue
        try:
            if portable(shipped_manifest(manifest)["identity"]) != portable(identity):  # type: ignore[arg-type]
                continue
        except PoolFileError:
            continue  # refused by name before any work (fixtures.freeze_pools.shipped_problems)
        out[_shown(manifest.with_suffix(".parquet"))] = _size(manifest, manifest.with_suffix(".parquet"))
    if settings.retrain:
        return out
    if any(d.kind == "lambdamart" for d in decls):
        cached = settings.cache_dir / "models" / "lambdamart"
        shipped = Path(shipped_dir, "lambdamart")
        for folder in sorted(p for p in shipped.iterdir() if p.is_dir()) if shipped.is_dir() else []:
            if not (cached / folder.name).is_dir():
                out[_shown(folder)] = _size(*folder.iterdir())
    if any(d.kind == "cross_encoder" and d.options.get("model") == "trained" for d in decls):
        for table in sorted(Path(shipped_dir, "judgments").glob("*.parquet")):
            out[_shown(table)] = _size(table)
    return out


def space_problem(settings: Settings, profile: Profile, decls: Sequence[RankerDecl], study: Callable[[], Study],
                  frozen_dir: Path = FROZEN_DIR, shipped_dir: Path = SHIPPED_DIR) -> str | None:
    """Why the cache folder cannot hold what the run copies into it (``shipped_inputs``): fewer bytes free than they
    take; None. With room for everything the checkout ships, nothing is looked up (every run but on a full disk)."""
    existing = next(p for p in (settings.cache_dir, *settings.cache_dir.parents) if p.exists())  # made by the run
    free = shutil.disk_usage(existing).free
    if free >= _size(*(p for folder in (frozen_dir, shipped_dir) for p in Path(folder).rglob("*"))):
        return None
    inputs = shipped_inputs(settings, profile, decls, study(), frozen_dir, shipped_dir)
    need = sum(inputs.values())
    if need <= free:
        return None
    biggest = sorted(inputs, key=inputs.__getitem__, reverse=True)
    listed = ", ".join(f"{name} ({inputs[name] / MB:.1f} MB)" for name in biggest[:4]) + \
        (f" and {len(biggest) - 4} more" if len(biggest) > 4 else "")
    return (f"--cache-dir {settings.cache_dir}: {free / MB:.1f} MB free, but this run copies {need / MB:.1f} MB of "
            f"shipped inputs into it ({listed}); nothing was copied: free some space there or choose another "
            "--cache-dir (or NEVIR_CACHE_DIR)")
