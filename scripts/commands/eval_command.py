"""`rltrain eval`: a saved policy evaluated deterministically, as training evaluates it.

The env is made with the run's `env_kwargs` (and its `eval_env_kwargs` over them), and
with `normalize.observations` the policy sees observations normalised with the
statistics the checkpoint holds (frozen). torch and Gymnasium are imported when the
command runs, not when the CLI starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rltrain.utils.errors import UserError

if TYPE_CHECKING:
    import gymnasium as gym

    from rltrain.networks.actor import Actor


def make_env(env_name: str, **kwargs: Any) -> gym.Env:
    """utils/training/envs.py's `make_env`, imported (with Gymnasium) when the command runs."""
    from rltrain.utils.training.envs import make_env as make

    return make(env_name, **kwargs)


@click.command("eval")
@click.option("--checkpoint", "checkpoint_path", required=True, metavar="FILE",
              help="A checkpoint written by rltrain (best_model.pt, checkpoint_step_*.pt, ...).")
@click.option("--episodes", type=click.IntRange(min=1), default=None,
              help="Episodes to run (default: the run's n_eval_episodes).")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seed of the evaluation episodes (default: the run's seed).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--record-video", "video_dir", default=None, metavar="DIR",
              help="Also record the first evaluation episode as an MP4 in DIR "
                   '(needs pip install "rltrain[video]").')
def eval_command(checkpoint_path: str, episodes: int | None, seed: int | None,
                 as_json: bool, video_dir: str | None) -> None:
    """Evaluate a saved policy deterministically (no noise, no training)."""
    import numpy as np
    import torch

    from rltrain.scripts.training.agent_setup import checkpoint_config
    from rltrain.utils.config.schema import evaluation_env_kwargs
    from rltrain.utils.diagnosis.measure import snapshots
    from rltrain.utils.io.checkpoint import load_checkpoint
    from rltrain.utils.training.evaluation import evaluate
    from rltrain.utils.training.normalize import normalizer_from_checkpoint

    if video_dir is not None and not snapshots.video_available():
        raise UserError(snapshots.INSTALL_HINT)
    payload = load_checkpoint(checkpoint_path)
    config = checkpoint_config(payload, checkpoint_path)
    env = make_env(config.env_name, env_kwargs=evaluation_env_kwargs(config))
    actor = load_actor(payload, env, checkpoint_path)
    seen = normalizer_from_checkpoint(payload, config.normalize, config.gamma).observation
    episodes = episodes or config.n_eval_episodes
    seed = config.seed if seed is None else seed
    with torch.inference_mode():
        def policy(obs: np.ndarray) -> np.ndarray:
            obs = torch.as_tensor(seen(obs), dtype=torch.float32)
            return actor(obs.unsqueeze(0))[0].numpy()

        result = evaluate(policy, env, episodes, seed, config.gamma,
                          env_name=config.env_name)
        video = None
        if video_dir is not None:
            video = snapshots.record_episode(policy, config.env_name, seed, _video_path(
                Path(video_dir), payload.get("run_name"), Path(checkpoint_path).stem, seed),
                evaluation_env_kwargs(config))
    env.close()
    _print_result(as_json, checkpoint_path, config.env_name, int(payload["total_steps"]),
                  episodes, seed, result, video)


def _print_result(as_json: bool, checkpoint_path: str, env_name: str, total_steps: int,
                  episodes: int, seed: int, result: Any, video: Path | None) -> None:
    from rltrain.utils.io.checkpoint import to_json

    if as_json:
        click.echo(to_json({"checkpoint": checkpoint_path, "env_name": env_name,
                            "total_steps": total_steps, "episodes": episodes, "seed": seed,
                            "mean_return": result.mean, "std_return": result.std,
                            "returns": result.returns, "lengths": result.lengths,
                            "video": None if video is None else str(video)}))
        return
    click.echo(f"{env_name}, checkpoint at step {total_steps}: mean return "
               f"{result.mean:.2f} +/- {result.std:.2f} over {episodes} episodes (seed {seed})")
    if video is not None:
        click.echo(f"video: {video}")


def _video_path(folder: Path, run: str | None, stem: str, seed: int) -> Path:
    """`<run>_<checkpoint>_seed<S>.mp4` in `folder`, never one that is already there
    (every run has a best_model.pt)."""
    base = f"{run}_{stem}_seed{seed}" if run else f"{stem}_seed{seed}"
    path, n = folder / f"{base}.mp4", 1
    while path.exists():
        n += 1
        path = folder / f"{base}-{n}.mp4"
    return path


def load_actor(payload: dict, env, path: str) -> Actor:
    """The checkpoint's actor on the CPU, after checking it fits the env's spaces."""
    from rltrain.scripts.training.agent_setup import checkpoint_actor
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.io.checkpoint import check_spaces
    from rltrain.utils.training.envs import space_record

    config = config_from_dict(payload["config"])
    check_spaces(payload, space_record(config.env_name, env), path)
    return checkpoint_actor(payload, config, path)

