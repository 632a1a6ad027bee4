"""A CleanRL-style DDPG loop, watched by rltrain's `Watcher` (see docs/integrations.md).

    python docs/examples/cleanrl_ddpg.py --env-id Pendulum-v1 --total-timesteps 20000
    rltrain diagnose cleanrl_ddpg --log-dir logs

Exit code 0 when the loop ran to the end, 3 when a rule (or `rltrain pause`) paused it.
"""

from __future__ import annotations

import argparse
import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rltrain.integrations import Watcher


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Pendulum-v1")
    p.add_argument("--total-timesteps", type=int, default=20_000)
    p.add_argument("--learning-starts", type=int, default=1_000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--tau", type=float, default=0.005)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--exploration-noise", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=5_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--run-name", default="cleanrl_ddpg")
    p.add_argument("--log-dir", default="logs")
    p.add_argument("--checkpoint-dir", default="checkpoints")
    return p.parse_args(argv)


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, outputs))


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, action_dim: int, hidden: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim + action_dim, hidden, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=1))


class Actor(nn.Module):
    def __init__(self, obs_dim: int, space: gym.spaces.Box, hidden: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, space.shape[0])
        self.register_buffer("scale", torch.tensor((space.high - space.low) / 2.0))
        self.register_buffer("bias", torch.tensor((space.high + space.low) / 2.0))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # actions in the env's units
        return torch.tanh(self.net(obs)) * self.scale + self.bias


def update(args: argparse.Namespace, nets: tuple[nn.Module, ...],
           optimizers: tuple[torch.optim.Optimizer, ...],
           batch: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """One DDPG update; returns the critic loss, the actor loss and the mean Q."""
    actor, qf, actor_target, qf_target = nets
    actor_opt, q_opt = optimizers
    o, o2, a, r, d = batch
    with torch.no_grad():  # Compute the one-step TD target
        target = r + args.gamma * (1.0 - d) * qf_target(o2, actor_target(o2))
    q = qf(o, a)
    q_loss = F.mse_loss(q, target)
    q_opt.zero_grad()
    q_loss.backward()
    q_opt.step()
    actor_loss = -qf(o, actor(o)).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
    for net, target_net in ((actor, actor_target), (qf, qf_target)):
        for p, tp in zip(net.parameters(), target_net.parameters(), strict=True):
            tp.data.lerp_(p.data, args.tau)  # Polyak averaging
    return q_loss, actor_loss, q.mean()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    env, eval_env = gym.make(args.env_id), gym.make(args.env_id)
    space, obs_dim = env.action_space, env.observation_space.shape[0]
    actor, qf = Actor(obs_dim, space, args.hidden), QNetwork(obs_dim, space.shape[0], args.hidden)
    actor_target, qf_target = copy.deepcopy(actor), copy.deepcopy(qf)
    nets = (actor, qf, actor_target, qf_target)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.lr)
    q_opt = torch.optim.Adam(qf.parameters(), lr=args.lr)
    n = args.total_timesteps
    data = {"obs": np.zeros((n, obs_dim), np.float32), "next": np.zeros((n, obs_dim), np.float32),
            "act": np.zeros((n, space.shape[0]), np.float32), "rew": np.zeros((n, 1), np.float32),
            "done": np.zeros((n, 1), np.float32)}
    watcher = Watcher(actor, qf, env.observation_space, space, run_name=args.run_name,
                      log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir, config={
                          "env_name": args.env_id, "seed": args.seed, "max_timesteps": n,
                          "gamma": args.gamma, "batch_size": args.batch_size,
                          "learning_starts": args.learning_starts, "replay_buffer_size": n,
                          "exploration_noise": args.exploration_noise})
    obs, _ = env.reset(seed=args.seed)
    for step in range(n):
        if step < args.learning_starts:
            action = space.sample()
        else:
            with torch.no_grad():
                action = actor(torch.as_tensor(obs[None], dtype=torch.float32))[0].numpy()
            noise = rng.normal(0.0, actor.scale.numpy() * args.exploration_noise)
            action = np.clip(action + noise, space.low, space.high).astype(np.float32)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        for key, value in zip(data, (obs, next_obs, action, reward, terminated), strict=True):
            data[key][step] = value
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        obs = env.reset()[0] if terminated or truncated else next_obs
        if step >= args.learning_starts:
            idx = rng.integers(0, step + 1, args.batch_size)
            batch = [torch.as_tensor(v[idx]) for v in data.values()]
            q_loss, actor_loss, q_mean = update(args, nets, (actor_opt, q_opt), batch)
            watcher.after_update(critic_loss=q_loss, actor_loss=actor_loss, q_mean=q_mean)
        if (step + 1) % args.eval_every == 0:
            watcher.evaluate(eval_env)
        if watcher.should_pause:  # a rule, or `rltrain pause RUN`, asks the loop to stop
            watcher.pause(actor_target=actor_target, qf_target=qf_target,
                          actor_optimizer=actor_opt, q_optimizer=q_opt)
            return 3
    watcher.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
