"""Re-save shipped sweep weights without their all-zero frozen tensors (Layer 1's MLP, the biases),
which loading restores, and record in ``weights/MANIFEST.json`` what ties each smaller file to the run.

    python tools/compact_sweep_weights.py docs/sweep_results/f_three_seeds/weights [...]

Per file the manifest holds ``final_sha256`` (the SHA-256 of the run's ``final.pt``, as its sweep.json
records it: the file is checked to have it before it is rewritten), ``state_sha256`` (``assignadd.model.
state_sha256``: the weights themselves, the same for both files) and ``file_sha256`` (the shipped file).
A file already compact is left as it is. Nothing is half-written: each file is replaced whole.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from assignadd.fileio import atomic_write
from assignadd.model import load_checkpoint_full, save_checkpoint, state_sha256


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compact(folder: Path) -> dict:
    manifest_path = folder / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    sweep = json.loads((folder.parent / "sweep.json").read_text())
    recorded = {p["name"]: p["final_sha256"] for s in sweep["sweeps"] for p in s["points"]}
    for path in sorted(folder.glob("*.pt")):
        if path.name in manifest and manifest[path.name]["file_sha256"] == sha256(path):
            continue  # already compact and recorded
        if sha256(path) != recorded[path.stem]:
            raise SystemExit(f"{path}: not the final.pt its sweep.json records; refusing to rewrite it")
        model, meta = load_checkpoint_full(path)
        digest = state_sha256(model)
        tmp = path.with_suffix(".compact.tmp")
        save_checkpoint(
            model,
            tmp,
            task=meta["task"],
            step=meta["step"],
            metrics=meta["metrics"],
            run=meta["run"],
            drop_zero_frozen=True,
        )
        if state_sha256(load_checkpoint_full(tmp)[0]) != digest:
            tmp.unlink()
            raise SystemExit(f"{path}: the compact file does not load to the same weights")
        tmp.replace(path)
        manifest[path.name] = {"final_sha256": recorded[path.stem], "state_sha256": digest, "file_sha256": sha256(path)}
    atomic_write(manifest_path, json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
    return manifest


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(arg, len(compact(Path(arg))), "files")
