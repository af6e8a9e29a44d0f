"""Which model scored a row, and why not the shipped one (docs/protocol.md#shipped-reference).

The checkout ships the trained cross-encoder's judgments of the study (``rankers.shipped``). Where they ship for a
run's inputs but fail their seal (an edited file), the run refuses them with a warning and computes in their
place: a subset run whose cache lacks the full model trains the smaller CI-budget model, whose row differs (MRR
0.229 against 0.401 in the probe). So every Table II row of a ranker whose model the suite trains records in the
manifest (``scored_by:<ranker>``) which model scored it, its cache key and where it came from, and, when the
shipped judgments were refused, why; the report's bottom line and the terminal name such a row
(``reports.bottom_line.substitutions``). A LambdaMART model refused is retrained from the same inputs, byte for byte
the shipped one (``tests/rankers/test_shipped.py``), so no other model scores its rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fixtures.artifacts import ArtifactCorrupt, check_seal
from rankers.declarations import RankerDecl
from rankers.kinds.base import Context
from rankers.shipped import judgments_path


@dataclass(frozen=True)
class ScoredBy:
    """The model that scored a ranker's judgments (``model``: what it is; ``model_key``: its score-cache key),
    ``source``: the judgments shipped with the checkout or a model trained by the suite, and ``refused``: why the
    study's shipped judgments for these inputs were not used (None: they were, or none ship for them)."""

    model: str
    model_key: str
    source: str
    refused: str | None = None

    def entry(self) -> dict[str, str | None]:
        """As the manifest's ``scored_by:<ranker>`` holds it."""
        return {"model": self.model, "model_key": self.model_key, "source": self.source, "refused": self.refused}


def shipped_refusal(identity: dict[str, Any]) -> str | None:
    """Why the judgments shipped for this judge identity are not used: a file fails its plain seal (None: none ship
    for it, or they verify), as ``rankers.shipped.ShippedJudgments.find`` refuses them."""
    manifest = judgments_path(identity)
    if not manifest.is_file() or not manifest.with_suffix(".parquet").is_file():
        return None
    for path, what in ((manifest, "judgments manifest"), (manifest.with_suffix(".parquet"), "judgments table")):
        try:
            check_seal(path, what, keyed=False)
        except ArtifactCorrupt as exc:  # it names the file
            return f"shipped {exc} (restore it with git checkout -- data/reference)"
        except OSError as exc:
            return f"shipped {what} {path}: {exc}"
    return None


def scored_by(decl: RankerDecl, ctx: Context) -> ScoredBy | None:
    """Which model scored a declaration whose model the suite trains (its kind's ``trained_state``: the trained
    cross-encoder), asked once its row is computed, when its scorer's key is known; None for any other ranker. The
    shipped judgments are the full-budget model's, so those are the ones a refusal names."""
    kind = decl.ranker_kind
    state = kind.trained_state(decl, ctx) if hasattr(kind, "trained_state") else None
    if state is None:
        return None
    whose = "NevIR's" if decl.options.get("train_on") == "nevir" else "the dataset's"
    source = ("its judgments shipped in data/reference/judgments/" if state.shipped
              else "fine-tuned by this suite (the cache's models/cross-encoder/)")
    refused = shipped_refusal(kind.identity(decl, ctx, "full")) if ctx.shipped else None
    return ScoredBy(f"the cross-encoder fine-tuned on {whose} Train pools, {state.budget} budget",
                    kind.scorer(decl, ctx).model_key, source, refused)
