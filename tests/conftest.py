"""Shared fixtures: the paper's task and small random checkpoints in the two formats of SPEC §2.4.

Kept generic: nothing here knows a particular test. Everything is seeded and CPU-only.
"""

from __future__ import annotations

# Imported before any in-process pytest run: pytester restores sys.modules after each, so a module first
# imported inside one such run is imported afresh by the next, and a process pool then holds two versions
# of its classes, which pickling refuses (the claims' forked workers of the pytest plugin's tests).
import concurrent.futures.process  # noqa: F401
import math

import pytest
import torch

from assignadd.data import Task

D_MODEL, D_HEAD, D_MLP, N_CTX, D_VOCAB, D_VOCAB_OUT = 128, 128, 512, 16, 74, 59


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under ``make test`` (pytest-xdist, ``-n ... --dist loadgroup``): the ``slow`` tests first, and
    ``xdist_group`` marks that work. Without xdist, nothing changes.

    Slow first: xdist hands each worker up to three tests ahead, so long tests next to each other in the
    collection (the break matrix's three parts) can end up queued in one worker while the other runs
    out of work; taken first, the long tests are spread while there is plenty of short work left for the
    end. (xdist still runs the groups before the single tests, the largest group first.)

    Groups: xdist tells its scheduler an item's group by appending ``@group`` to the item's node id, in
    each worker after collection. pytest 9.2 made node ids structured, and xdist 3.8's edit of the old
    field no longer shows in ``item.nodeid`` (pytest-xdist issue #1386): every group would be split over
    the workers, and each worker would compute the group's module fixture again. Here the same suffix is
    set where xdist's did not take.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise in order
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2, where the suffix needs setting here
    except ImportError:
        return
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


@pytest.fixture(scope="session", autouse=True)
def single_threaded_torch():
    """Tests run torch on one thread: their tensors are tiny, and on a shared machine a second
    intra-op thread mostly waits for the first (a 1-step training run: 0.3 s against 15 s)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def paper_task() -> Task:
    """The paper's task: f = 0.7, r = 1, split seed 42 (SPEC §1.3)."""
    return Task()


def tl_state_dict(seed: int = 0, *, biases: bool = True, layer1_mlp: bool = True, scale: float = 1.0) -> dict:
    """A random state dict in the bare TransformerLens 2.x layout of SPEC §2.4, buffers included.

    ``biases`` makes every bias nonzero; ``layer1_mlp`` gives Layer 1 (``blocks.0``) a nonzero MLP.
    Weights are N(0, (scale * 0.8 / sqrt(d_model))^2), TransformerLens' init scale.
    """
    gen = torch.Generator().manual_seed(seed)
    std = scale * 0.8 / math.sqrt(D_MODEL)

    def w(*shape):
        return torch.randn(*shape, generator=gen) * std

    def b(*shape):
        return torch.randn(*shape, generator=gen) * 0.1 if biases else torch.zeros(*shape)

    sd = {"embed.W_E": w(D_VOCAB, D_MODEL), "pos_embed.W_pos": w(N_CTX, D_MODEL)}
    for layer in (0, 1):
        p = f"blocks.{layer}."
        mlp_on = layer == 1 or layer1_mlp
        sd.update(
            {
                p + "attn.W_Q": w(1, D_MODEL, D_HEAD),
                p + "attn.W_K": w(1, D_MODEL, D_HEAD),
                p + "attn.W_V": w(1, D_MODEL, D_HEAD),
                p + "attn.W_O": w(1, D_HEAD, D_MODEL),
                p + "attn.b_Q": b(1, D_HEAD),
                p + "attn.b_K": b(1, D_HEAD),
                p + "attn.b_V": b(1, D_HEAD),
                p + "attn.b_O": b(D_MODEL),
                p + "attn.mask": torch.tril(torch.ones(N_CTX, N_CTX)).bool(),
                p + "attn.IGNORE": torch.tensor(-torch.inf),
                p + "mlp.W_in": w(D_MODEL, D_MLP) if mlp_on else torch.zeros(D_MODEL, D_MLP),
                p + "mlp.b_in": b(D_MLP) if mlp_on else torch.zeros(D_MLP),
                p + "mlp.W_out": w(D_MLP, D_MODEL) if mlp_on else torch.zeros(D_MLP, D_MODEL),
                p + "mlp.b_out": b(D_MODEL) if mlp_on else torch.zeros(D_MODEL),
            }
        )
    sd.update({"unembed.W_U": w(D_MODEL, D_VOCAB_OUT), "unembed.b_U": b(D_VOCAB_OUT)})
    return sd


def save_tl(state_dict: dict, path) -> None:
    """Save as a TransformerLens 2.x run does: ``torch.save`` with pickle protocol 4."""
    torch.save(state_dict, path, pickle_protocol=4)


@pytest.fixture
def tl_checkpoint(tmp_path):
    """Path of a bare TransformerLens checkpoint with nonzero biases and a nonzero Layer-1 MLP: the
    weights of ``tl_state_dict(seed=0)``, saved with pickle protocol 4."""
    path = tmp_path / "tl_random.pt"
    save_tl(tl_state_dict(seed=0), path)
    return path


@pytest.fixture(scope="session")
def make_tl_state_dict():
    """The factory ``tl_state_dict(seed, biases=..., layer1_mlp=..., scale=...)`` (tests take helpers
    as fixtures rather than importing conftest)."""
    return tl_state_dict


@pytest.fixture(scope="session")
def save_tl_checkpoint():
    """The saver ``save_tl(state_dict, path)``: pickle protocol 4, as TransformerLens 2.x."""
    return save_tl


@pytest.fixture(scope="session", autouse=True)
def claims_in_the_tests_process_under_xdist():
    """Under pytest-xdist the test workers are the parallelism: a model's claims run in the test's own
    process unless the test asks for worker processes (``jobs=N``), instead of forking one worker per core
    inside each test worker (two forked claim workers beside the interface checks, in each of two test
    workers, on two cores). Measured on the break matrix's three parts, two test workers, 2 cores:
    127-133 s a part against 150-152 s, 411 s of CPU against 454 s. A command run as a subprocess still
    chooses its own workers."""
    import os

    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    from assignadd.hypotheses import session

    original = session.resolve_jobs
    session.resolve_jobs = lambda jobs, ctx, n_claims: original(1 if jobs is None else jobs, ctx, n_claims)
    yield
    session.resolve_jobs = original
