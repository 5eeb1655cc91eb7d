"""Interventions: change what flows through the model and measure what changes.

The engine knows nothing about any particular claim. A ``Site`` names a hook point (SPEC §2.3) and
optionally positions / attention keys; an intervention kind (``Zero``, ``Mean``, ``Resample``,
``Replace``, ``Patch``, ``Project``) says what the selected cells become; ``run`` applies a list of
them in one forward pass (TransformerLens hooks or nnsight) and raises ``InterventionError`` if any
hook did not fire exactly once. ``knockout`` makes a permanently ablated copy for control models.
``patching`` builds activation patching, path patching and interchange interventions on top;
``metrics`` and ``statistics`` score them per example, with confidence intervals.
Recipes: docs/interventions.md.
"""

from .engine import (
    BACKENDS,
    Result,
    capture,
    check_hook_names,
    execution_order,
    firing_hooks,
    knockout,
    run,
    run_in_pieces,
)
from .kinds import Intervention, Mean, Patch, Project, Replace, Resample, Zero, orthonormal_rows, random_subspace
from .metrics import accuracy, compare, last_position, logit_diff, loss, normalized, summarize_accuracy
from .patching import InterchangeResult, activation_patch, interchange, patch_sweep, path_patch
from .site import InterventionError, Site, position_mask
from .statistics import fraction_worse, mean_ci, normalized_effect, rate_ci

__all__ = [
    "capture",
    "BACKENDS",
    "InterchangeResult",
    "Intervention",
    "InterventionError",
    "Mean",
    "Patch",
    "Project",
    "Replace",
    "Resample",
    "run_in_pieces",
    "Result",
    "Site",
    "Zero",
    "accuracy",
    "activation_patch",
    "check_hook_names",
    "compare",
    "execution_order",
    "firing_hooks",
    "fraction_worse",
    "interchange",
    "knockout",
    "last_position",
    "logit_diff",
    "loss",
    "mean_ci",
    "normalized",
    "normalized_effect",
    "orthonormal_rows",
    "patch_sweep",
    "path_patch",
    "position_mask",
    "random_subspace",
    "rate_ci",
    "run",
    "summarize_accuracy",
]
