"""A CleanRL-style DDPG loop watched by rltrain's `Watcher` (`rltrain diagnose cleanrl_ddpg`
shows what it found). Exits 0 at the end, 3 when a rule or `rltrain pause` paused it."""

import argparse
import copy

import gymnasium as gym
import numpy as np
import torch
from torch import nn, optim

from rltrain.integrations import Watcher

ARGS = {"env_id": "Pendulum-v1", "total_timesteps": 20_000, "learning_starts": 1_000,
        "batch_size": 256, "hidden": 256, "gamma": 0.99, "tau": 0.005, "lr": 3e-4,
        "exploration_noise": 0.1, "eval_every": 5_000, "seed": 1, "run_name": "cleanrl_ddpg"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    for name, default in ARGS.items():  # --env-id ..., each typed as its default
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return p.parse_args(argv)


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, outputs))


class QNetwork(nn.Sequential):  # (obs, action) -> Q [B, 1]
    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return super().forward(torch.cat([obs, action], dim=1))


class Actor(nn.Module):
    def __init__(self, obs_dim: int, space: gym.spaces.Box, hidden: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, space.shape[0])
        self.register_buffer("scale", torch.tensor((space.high - space.low) / 2.0))
        self.register_buffer("bias", torch.tensor((space.high + space.low) / 2.0))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # actions in the env's units
        return torch.tanh(self.net(obs)) * self.scale + self.bias


def update(args: argparse.Namespace, nets: tuple, opts: tuple, batch: tuple) -> dict:
    """One DDPG update; returns the losses and the mean Q, as `after_update` takes them."""
    (actor, qf, actor_target, qf_target), (actor_opt, q_opt), (o, o2, a, r, d) = nets, opts, batch
    with torch.no_grad():  # Compute the TD target; no bootstrap past a terminal state
        target = r + args.gamma * (1.0 - d) * qf_target(o2, actor_target(o2))
    q = qf(o, a)
    q_loss = ((q - target) ** 2).mean()
    q_opt.zero_grad()
    q_loss.backward()
    q_opt.step()
    actor_loss = -qf(o, actor(o)).mean()  # Update the actor through the updated critic
    actor_opt.zero_grad()
    actor_loss.backward(inputs=list(actor.parameters()))  # the critic's .grad: its own loss's
    actor_opt.step()
    for net, target_net in ((actor, actor_target), (qf, qf_target)):  # Polyak averaging
        for p, tp in zip(net.parameters(), target_net.parameters(), strict=True):
            tp.data.lerp_(p.data, args.tau)
    return {"critic_loss": q_loss, "actor_loss": actor_loss, "q_mean": q.mean(),
            "batch": {"obs": o, "dones": d}}  # its done flags, checked against the env's


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    env, eval_env = gym.make(args.env_id), gym.make(args.env_id)
    space, obs_dim, n = env.action_space, env.observation_space.shape[0], args.total_timesteps
    actor = Actor(obs_dim, space, args.hidden)
    qf = QNetwork(*mlp(obs_dim + space.shape[0], args.hidden, 1))
    nets = (actor, qf, copy.deepcopy(actor), copy.deepcopy(qf))
    opts = (optim.Adam(actor.parameters(), lr=args.lr), optim.Adam(qf.parameters(), lr=args.lr))
    widths = [obs_dim, obs_dim, space.shape[0], 1, 1]  # obs, next obs, action, reward, done
    buffer = np.zeros((n, sum(widths)), np.float32)  # the replay buffer, a row per step
    watcher = Watcher(actor, qf, env.observation_space, space, run_name=args.run_name, config={
        "env_name": args.env_id, "seed": args.seed, "max_timesteps": n, "gamma": args.gamma,
        "batch_size": args.batch_size, "learning_starts": args.learning_starts, "tau": args.tau,
        "replay_buffer_size": n, "exploration_noise": args.exploration_noise},
        actor_target=nets[2], critic_target=nets[3])
    obs, _ = env.reset(seed=args.seed)
    for step in range(n):
        if step < args.learning_starts:
            action = space.sample()
        else:
            action = actor(torch.as_tensor(obs[None], dtype=torch.float32))[0].detach().numpy()
            noise = rng.normal(0.0, actor.scale.numpy() * args.exploration_noise)
            action = np.clip(action + noise, space.low, space.high).astype(np.float32)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer[step] = np.concatenate([obs, next_obs, action, [reward, terminated]])
        watcher.after_env_step(obs, action, reward, next_obs, terminated, truncated)
        obs = env.reset()[0] if terminated or truncated else next_obs
        if step >= args.learning_starts:
            batch = torch.as_tensor(buffer[rng.integers(0, step + 1, args.batch_size)])
            watcher.after_update(**update(args, nets, opts, batch.split(widths, dim=1)))
        if (step + 1) % args.eval_every == 0:
            watcher.evaluate(eval_env)
        if watcher.should_pause:  # a rule, or `rltrain pause RUN`, asks the loop to stop
            watcher.pause(actor_target=nets[2], qf_target=nets[3], actor_optimizer=opts[0],
                          q_optimizer=opts[1])
            return 3
    watcher.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
