"""Per-example metrics of an intervened run, read at the last position (where the answer is, SPEC §1.2),
and summaries with confidence intervals that always report how many examples got worse.

Every metric takes logits (B, T, V) or (B, V) and returns one value per example: a mean alone can hide
examples that moved the wrong way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .statistics import fraction_worse, mean_ci, normalized_effect, rate_ci


def last_position(logits: torch.Tensor) -> torch.Tensor:
    """Logits at the last position: (B, T, V) -> (B, V); (B, V) passes through."""
    return logits[:, -1] if logits.dim() == 3 else logits


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-example correctness, bool [B]: argmax_c logits[b, -1, c] == labels[b]."""
    return last_position(logits).argmax(dim=-1) == labels.to(logits.device)


def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy at the last position, [B]: -log softmax(logits[b, -1])[labels[b]]."""
    return F.cross_entropy(last_position(logits).float(), labels.to(logits.device), reduction="none")


def logit_diff(logits: torch.Tensor, correct: torch.Tensor, counterfactual: torch.Tensor) -> torch.Tensor:
    """Per-example logit difference, [B]: logits[b, -1, correct[b]] - logits[b, -1, counterfactual[b]].
    Positive when the model prefers the correct answer over the counterfactual one."""
    last = last_position(logits)
    rows = torch.arange(last.shape[0], device=last.device)
    return last[rows, correct.to(last.device)] - last[rows, counterfactual.to(last.device)]


def summarize_accuracy(correct, confidence: float = 0.95) -> dict:
    """Accuracy with its exact Clopper-Pearson interval: {"rate", "low", "high", "n"}."""
    rate, low, high = rate_ci(correct, confidence=confidence)
    return {"rate": rate, "low": low, "high": high, "n": int(torch.as_tensor(correct).numel())}


def compare(before, after, *, seed: int = 0, label: str = "", confidence: float = 0.95) -> dict:
    """How an intervention moved a per-example metric (higher = better, e.g. logit_diff or -loss).

    {"before", "after": means; "change", "low", "high": mean of (after - before) with its seeded
    bootstrap interval; "fraction_worse": share of examples with after < before; "n"}.
    """
    before = torch.as_tensor(before).detach().to(torch.float64).flatten()
    after = torch.as_tensor(after).detach().to(torch.float64).flatten()
    if before.shape != after.shape:
        raise ValueError(f"compare: before has {before.numel()} examples, after {after.numel()}")
    change, low, high = mean_ci(after - before, seed=seed, label=label, confidence=confidence)
    return {
        "before": float(before.mean()),
        "after": float(after.mean()),
        "change": change,
        "low": low,
        "high": high,
        "fraction_worse": fraction_worse(before, after),
        "n": int(before.numel()),
    }


def normalized(intervened, baseline, clean, *, min_denominator: float = 1e-3) -> dict:
    """Normalized effect of means, (M_int - M_base) / (M_clean - M_base): 1 = the intervention restores
    the clean behaviour, 0 = it does nothing. A denominator below ``min_denominator`` is reported
    ("value": None, "denominator" kept), never divided by."""
    m_int, m_base, m_clean = (
        float(torch.as_tensor(x).detach().to(torch.float64).mean()) for x in (intervened, baseline, clean)
    )
    return {
        "value": normalized_effect(m_int, m_base, m_clean, min_denominator=min_denominator),
        "denominator": m_clean - m_base,
        "intervened": m_int,
        "baseline": m_base,
        "clean": m_clean,
    }
