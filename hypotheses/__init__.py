"""The paper's claims as falsifiable hypotheses (SPEC §4). Importing this package registers them all,
in the order a report lists them."""

from .base import REGISTRY, ClaimResult, Context, Evidence, Hypothesis, Measurement, Threshold, decide, register

# Registration order is report order.
from . import previous_token_head, identity_qk, shared_residual, fourier_neurons  # noqa: F401,E402
from . import heldout_generalization, restricted_slot_generalization  # noqa: F401,E402
from . import whole_algorithm  # noqa: F401,E402

__all__ = [
    "REGISTRY",
    "ClaimResult",
    "Context",
    "Evidence",
    "Hypothesis",
    "Measurement",
    "Threshold",
    "decide",
    "register",
    "run_all",
]


def run_all(ctx: Context, only: list[str] | None = None) -> list[ClaimResult]:
    """Run the registered hypotheses (or ``only`` those ids) in registry order."""
    ids = list(REGISTRY) if only is None else only
    unknown = [i for i in ids if i not in REGISTRY]
    if unknown:
        raise KeyError(f"unknown claim id(s): {', '.join(unknown)}; known: {', '.join(REGISTRY)}")
    return [REGISTRY[i]().run(ctx) for i in ids]
