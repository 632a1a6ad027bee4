"""A CleanRL-style DDPG loop watched by rltrain's `Watcher`, with the code faults users
report planted by name (`FAULTS`): the plain-loop half of the fault benchmark.

    no_zero_grad              the critic's gradients are never cleared: they add up
    frozen_target             the target networks are never updated
    done_includes_truncation  the time limit is stored as the end of the task
    unscaled_actions          the actor's tanh output goes to the env unscaled ([-1, 1]
                              on Pendulum's [-2, 2])
    actor_steps_critic        the actor's loss is backpropagated into the critic, which
                              its optimiser then steps
    next_obs_is_obs           the buffer stores the observation as its own next observation
    previous_reward           the buffer stores the previous step's reward with each step
    samples_recent_only       batches are drawn from the newest 256 transitions only
    samples_unfilled_rows     batches are drawn from the whole preallocated buffer, the
                              zero rows not yet written included
    actor_updates_per_critic  the actor takes 5 optimiser steps per critic step
    no_reset_at_truncation    the env is not reset when its time limit cuts an episode
    actor_minimises_q         the actor's loss is +Q: it descends the critic's value

Healthy, it is CleanRL's DDPG (256-unit layers, tau 0.005, batch 256, Gaussian noise
0.1 of the half-range) with RL Zoo's Pendulum learning rate (1e-3) and a 1000-step
random warm-up; the Watcher gets its target networks and its settings.
"""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn, optim

from rltrain.integrations import Watcher

FAULTS = ("no_zero_grad", "frozen_target", "done_includes_truncation", "unscaled_actions",
          "actor_steps_critic", "next_obs_is_obs", "previous_reward", "samples_recent_only",
          "samples_unfilled_rows", "actor_updates_per_critic", "no_reset_at_truncation",
          "actor_minimises_q")
ACTOR_STEPS = 5  # actor_updates_per_critic: actor steps per critic step


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, outputs))


class QNetwork(nn.Sequential):
    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return super().forward(torch.cat([obs, action], dim=1))


class Actor(nn.Module):
    def __init__(self, obs_dim: int, space: gym.spaces.Box, hidden: int, scaled: bool) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, space.shape[0])
        half = (space.high - space.low) / 2.0 if scaled else np.ones_like(space.high)
        middle = (space.high + space.low) / 2.0 if scaled else np.zeros_like(space.high)
        self.register_buffer("scale", torch.tensor(half, dtype=torch.float32))
        self.register_buffer("bias", torch.tensor(middle, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * self.scale + self.bias


def update(nets: tuple, opts: tuple, batch: tuple, fault: str | None, gamma: float,
           tau: float) -> dict:
    (actor, qf, actor_target, qf_target), (actor_opt, q_opt), (o, o2, a, r, d) = nets, opts, batch
    with torch.no_grad():
        target = r + gamma * (1.0 - d) * qf_target(o2, actor_target(o2))
    q = qf(o, a)
    q_loss = ((q - target) ** 2).mean()
    if fault != "no_zero_grad":
        q_opt.zero_grad()
    q_loss.backward()
    q_opt.step()
    for _ in range(ACTOR_STEPS if fault == "actor_updates_per_critic" else 1):
        actor_loss = actor_step(actor, qf, (actor_opt, q_opt), o, fault)
    if fault != "frozen_target":
        for net, target_net in ((actor, actor_target), (qf, qf_target)):
            for p, tp in zip(net.parameters(), target_net.parameters(), strict=True):
                tp.data.lerp_(p.data, tau)
    return {"critic_loss": q_loss, "actor_loss": actor_loss, "q_mean": q.mean(),
            "batch": {"obs": o, "dones": d}}


def actor_step(actor: nn.Module, qf: nn.Module, opts: tuple, o: torch.Tensor,
               fault: str | None) -> torch.Tensor:
    actor_opt, q_opt = opts
    q_of_policy = qf(o, actor(o)).mean()
    actor_loss = q_of_policy if fault == "actor_minimises_q" else -q_of_policy
    actor_opt.zero_grad()
    if fault == "actor_steps_critic":
        q_opt.zero_grad()
        actor_loss.backward()
        q_opt.step()  # the critic moves to raise its own value of the actor's actions
    else:
        actor_loss.backward(inputs=list(actor.parameters()))
    actor_opt.step()
    return actor_loss


def stored(fault: str | None, obs: np.ndarray, next_obs: np.ndarray, action: np.ndarray,
           reward: float, previous_reward: float, done: bool) -> np.ndarray:
    """The buffer's row for one step, as the loop (with `fault`) writes it."""
    if fault == "next_obs_is_obs":
        next_obs = obs
    if fault == "previous_reward":
        reward = previous_reward
    return np.concatenate([obs, next_obs, action, [reward, done]])


def batch_rows(fault: str | None, step: int, capacity: int,
               rng: np.random.Generator) -> np.ndarray:
    """The buffer rows of one batch of 256, after `step` + 1 rows were written."""
    if fault == "samples_recent_only":
        return rng.integers(max(0, step - 255), step + 1, 256)
    if fault == "samples_unfilled_rows":
        return rng.integers(0, capacity, 256)
    return rng.integers(0, step + 1, 256)


def run(fault: str | None, env_id: str, steps: int, seed: int, folder: Path,
        run_name: str, hidden: int = 256, learning_starts: int = 1000, lr: float = 1e-3,
        eval_every: int | None = None, watch: dict | None = None) -> Path:
    """Train `steps` env steps with `fault` planted; the run's log folder. Evaluated
    every `eval_every` steps (default: a fifth of the run, as the benchmark's rltrain
    runs are), so that the last evaluation is the policy at the end. `watch`: more
    config keys for the Watcher (rule settings)."""
    eval_every = eval_every or max(steps // 5, 1000)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env, eval_env = gym.make(env_id), gym.make(env_id)
    space, obs_dim = env.action_space, env.observation_space.shape[0]
    actor = Actor(obs_dim, space, hidden, scaled=fault != "unscaled_actions")
    qf = QNetwork(*mlp(obs_dim + space.shape[0], hidden, 1))
    actor_target, qf_target = copy.deepcopy(actor), copy.deepcopy(qf)
    nets = (actor, qf, actor_target, qf_target)
    opts = (optim.Adam(actor.parameters(), lr=lr), optim.Adam(qf.parameters(), lr=lr))
    widths = [obs_dim, obs_dim, space.shape[0], 1, 1]
    buffer = np.zeros((steps, sum(widths)), np.float32)
    config = {"env_name": env_id, "seed": seed, "max_timesteps": steps, "gamma": 0.99,
              "batch_size": 256, "learning_starts": learning_starts, "tau": 0.005,
              "actor_lr": lr, "critic_lr": lr,
              # the buffer keeps every step: none is ever overwritten
              "replay_buffer_size": 1_000_000, "eval_freq": eval_every, **(watch or {})}
    watcher = Watcher(actor, qf, env.observation_space, space, run_name=run_name,
                      log_dir=str(folder / "logs"), checkpoint_dir=str(folder / "ck"),
                      config=config, actor_target=actor_target, critic_target=qf_target)
    obs, _ = env.reset(seed=seed)
    space.seed(seed)  # the warm-up's random actions
    previous_reward = 0.0
    for step in range(steps):
        if step < learning_starts:
            action = space.sample()
        else:
            action = actor(torch.as_tensor(obs[None], dtype=torch.float32))[0].detach().numpy()
            noise = rng.normal(0.0, 0.1 * actor.scale.numpy())
            action = np.clip(action + noise, space.low, space.high).astype(np.float32)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or (truncated and fault == "done_includes_truncation")
        buffer[step] = stored(fault, obs, next_obs, action, reward, previous_reward, done)
        previous_reward = float(reward)
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        ended = terminated or (truncated and fault != "no_reset_at_truncation")
        obs = env.reset()[0] if ended else next_obs
        if step >= learning_starts:
            rows = batch_rows(fault, step, len(buffer), rng)
            batch = torch.as_tensor(buffer[rows])
            watcher.after_update(**update(nets, opts, batch.split(widths, dim=1), fault,
                                          0.99, 0.005))
        if (step + 1) % eval_every == 0:
            watcher.evaluate(eval_env)
        if watcher.should_pause:
            watcher.pause()
            break
    watcher.close()
    return folder / "logs" / run_name
