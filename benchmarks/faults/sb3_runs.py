"""The fault benchmark's PPO, A2C and DQN runs: Stable-Baselines3 on RL Zoo's tuned
settings, watched by `RltrainCallback`, as a user of those libraries trains them.

A healthy run's `algo` is `sb3_ppo`, `sb3_a2c` or `sb3_dqn`; its settings are RL Zoo's
entry for the env (`ZOO`, from DLR-RM/rl-baselines3-zoo's hyperparams/ppo.yml, a2c.yml,
dqn.yml; LunarLander's entries are RL Zoo's LunarLander-v2 ones, the env Gymnasium now
calls LunarLander-v3). RL Zoo's `normalize: true` is SB3's VecNormalize around the
training envs (observations and rewards); the evaluations see observations normalised by
its running statistics and the raw rewards. A run shorter than RL Zoo's `n_timesteps`
scales its linear schedules (`lin_<start>`) to its own length, as RL Zoo does. A case's
`sets` are SB3's own keyword names, on top of those settings; its `env_fault` wraps
every env of the run (training and evaluation) in benchmarks/faults/envs.py's fault.

The callback's settings are its defaults, with the evaluation every fifth of the run (on
an env of its own, the fault included) and early stopping off, as the rltrain runs of
the benchmark have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import gymnasium as gym

# The SB3 class of each benchmark algo name.
CLASSES = {"sb3_ppo": "PPO", "sb3_a2c": "A2C", "sb3_dqn": "DQN"}


def linear(start: float) -> Callable[[float], float]:
    """RL Zoo's `lin_<start>`: from `start` down to 0 over the run."""
    return lambda progress: progress * start


# (algo, env) -> (n_envs, SB3 keyword arguments): RL Zoo's entries.
ZOO: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {
    ("sb3_ppo", "CartPole-v1"): (8, {
        "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20,
        "ent_coef": 0.0, "learning_rate": "lin_0.001", "clip_range": "lin_0.2"}),
    ("sb3_ppo", "Pendulum-v1"): (4, {
        "n_steps": 1024, "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10, "ent_coef": 0.0,
        "learning_rate": 1e-3, "clip_range": 0.2, "use_sde": True, "sde_sample_freq": 4}),
    ("sb3_ppo", "LunarLander-v3"): (16, {
        "n_steps": 1024, "batch_size": 64, "gae_lambda": 0.98, "gamma": 0.999,
        "n_epochs": 4, "ent_coef": 0.01}),
    ("sb3_ppo", "MountainCar-v0"): (16, {
        "normalize": True, "n_steps": 16, "gae_lambda": 0.98, "gamma": 0.99, "n_epochs": 4,
        "ent_coef": 0.0}),
    ("sb3_a2c", "CartPole-v1"): (8, {"ent_coef": 0.0}),
    ("sb3_a2c", "LunarLander-v3"): (8, {
        "gamma": 0.995, "n_steps": 5, "learning_rate": "lin_0.00083", "ent_coef": 1e-5}),
    ("sb3_dqn", "CartPole-v1"): (1, {
        "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
        "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10,
        "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}}),
    ("sb3_dqn", "LunarLander-v3"): (1, {
        "learning_rate": 6.3e-4, "batch_size": 128, "buffer_size": 50_000,
        "learning_starts": 0, "gamma": 0.99, "target_update_interval": 250,
        "train_freq": 4, "gradient_steps": -1, "exploration_fraction": 0.12,
        "exploration_final_eps": 0.1, "policy_kwargs": {"net_arch": [256, 256]}}),
    ("sb3_dqn", "MountainCar-v0"): (1, {
        "learning_rate": 4e-3, "batch_size": 128, "buffer_size": 10_000,
        "learning_starts": 1000, "gamma": 0.98, "target_update_interval": 600,
        "train_freq": 16, "gradient_steps": 8, "exploration_fraction": 0.2,
        "exploration_final_eps": 0.07, "policy_kwargs": {"net_arch": [256, 256]}}),
}


def settings(algo: str, env_id: str, sets: dict[str, Any] | None = None
             ) -> tuple[int, dict[str, Any]]:
    """RL Zoo's n_envs and keyword arguments for `algo` on `env_id` with a case's `sets`
    (SB3's names; `n_envs` among them sets the number of envs; `normalize`, RL Zoo's, is
    the run's VecNormalize: see `run`), `lin_<x>` made into SB3's schedules."""
    n_envs, kwargs = ZOO[(algo, env_id)]
    kwargs = {**kwargs, **(sets or {})}
    n_envs = int(kwargs.pop("n_envs", n_envs))
    return n_envs, {k: _schedule(v) for k, v in kwargs.items()}


def _schedule(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        return linear(float(value[len("lin_"):]))
    return value


def make_env(env_id: str, env_fault: dict[str, Any] | None) -> Callable[[], Any]:
    """A function that makes one env of the run: `env_id`, or it wrapped in a fault."""
    import benchmarks.faults.envs  # noqa: F401  (registers Faulty-v0)

    if env_fault is None:
        return lambda: gym.make(env_id)
    return lambda: gym.make("Faulty-v0", base=env_id, **env_fault)


def run(algo: str, env_id: str, sets: dict[str, Any] | None,
        env_fault: dict[str, Any] | None, steps: int, seed: int, folder: Path,
        run_name: str) -> Path:
    """Train `algo` on `env_id` for `steps` env steps, watched; the run's log folder."""
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env

    from rltrain.integrations.sb3 import RltrainCallback

    n_envs, kwargs = settings(algo, env_id, sets)
    normalize = kwargs.pop("normalize", False)
    env = make_vec_env(make_env(env_id, env_fault), n_envs=n_envs, seed=seed)
    eval_env = make_env(env_id, env_fault)()
    if normalize:
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, gamma=kwargs.get("gamma", 0.99))
        eval_env = NormalizedObservations(eval_env, env)
    model = getattr(stable_baselines3, CLASSES[algo])("MlpPolicy", env, seed=seed,
                                                      device="cpu", **kwargs)
    callback = RltrainCallback(
        run_name=run_name, log_dir=str(folder / "logs"), checkpoint_dir=str(folder / "ck"),
        config={"eval_freq": max(steps // 5, 1000), "patience": 1000}, eval_env=eval_env)
    model.learn(steps, callback=callback)
    return folder / "logs" / run_name



class NormalizedObservations(gym.ObservationWrapper):
    """An env whose observations `normalizer` (the training envs' VecNormalize) scales
    with its running statistics, as the policy saw them in training; rewards left raw."""

    def __init__(self, env: gym.Env, normalizer: Any) -> None:
        super().__init__(env)
        self.normalizer = normalizer

    def observation(self, obs: Any) -> Any:
        return self.normalizer.normalize_obs(obs).astype("float32")
