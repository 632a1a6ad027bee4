"""The update of the working tree against the update of a git commit, in one process.

    python benchmarks/update_ab.py                      # against HEAD
    python benchmarks/update_ab.py --against 2315883 --blocks 40
    python benchmarks/update_ab.py --config pendulum_sac.yaml

Changes to the update worth a few percent drown in the machine's drift between
processes (10-20% within minutes here), so this runs both versions in one process:
the commit's package is extracted to a temporary folder under another name
(`rltrain_ref`, its imports rewritten), both agents are built from the same seed on
identically filled replay buffers, and blocks of updates alternate between them (the
order flips every block). Prints each version's median time per update, the median of
the per-pair ratios with their range, and whether the two agents' weights are still
bit-identical after all their updates (a change meant to keep behaviour should say yes).
Settings: `configs/pendulum_ddpg.yaml` (256x256, batch 256), CPU, or `--config`'s.
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import agent_on_filled_buffer, timed_updates  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REF = "rltrain_ref"


def extract(ref: str, folder: Path) -> None:
    """The commit's tree as package `rltrain_ref` in `folder`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True,
                             check=True).stdout
    target = folder / REF
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    for path in target.rglob("*.py"):
        text = re.sub(r"\brltrain\b(?=[. ])", REF, path.read_text())
        path.write_text(text)


def same_weights(a, b) -> bool:
    """Whether two agents' networks (those each keeps: SAC has no actor target) hold the
    same weights."""
    nets = [net for net in ("actor", "critic", "actor_target", "critic_target")
            if hasattr(a, net)]
    return all(torch.equal(x, y) for net in nets
               for x, y in zip(getattr(a, net).parameters(), getattr(b, net).parameters(),
                               strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD", help="git commit to compare with")
    parser.add_argument("--blocks", type=int, default=20, help="blocks per version")
    parser.add_argument("--updates", type=int, default=100, help="updates per block")
    parser.add_argument("--buffer", type=int, default=20_000, help="filled replay rows")
    parser.add_argument("--config", default="pendulum_ddpg.yaml",
                        help="a shipped Pendulum config (pendulum_sac.yaml, ...)")
    args = parser.parse_args()
    from rltrain.utils.run.device import tune_process

    tune_process()  # as the Trainer does; process-wide, so both versions get it
    with tempfile.TemporaryDirectory() as folder:
        extract(args.against, Path(folder))
        sys.path.insert(0, folder)
        versions = {name: agent_on_filled_buffer(package, args.buffer, seed=0,
                                                 config_name=args.config)
                    for name, package in (("reference", REF), ("working tree", "rltrain"))}
        times: dict[str, list[float]] = {name: [] for name in versions}
        for _ in range(10):  # warm-up, the same updates for both
            for agent, buffer in versions.values():
                agent.update(buffer.sample(256))
        for index in range(args.blocks):
            order = list(versions) if index % 2 == 0 else list(reversed(versions))
            for name in order:
                seconds = timed_updates(*versions[name], args.updates)
                times[name].append(seconds / args.updates * 1e3)  # ms per update
        identical = same_weights(versions["reference"][0], versions["working tree"][0])
    ratios = sorted(r / w for r, w in zip(times["reference"], times["working tree"],
                                          strict=True))
    print(f"reference ({args.against}): {statistics.median(times['reference']):.3f} ms per "
          f"update; working tree: {statistics.median(times['working tree']):.3f} ms")
    print(f"speed-up (reference time / working-tree time), median of {args.blocks} pairs of "
          f"{args.updates} updates: {statistics.median(ratios):.3f} (range {ratios[0]:.3f}-"
          f"{ratios[-1]:.3f})")
    print(f"weights after {10 + args.blocks * args.updates} updates each: "
          f"{'bit-identical' if identical else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
