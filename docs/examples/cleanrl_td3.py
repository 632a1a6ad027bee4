"""CleanRL's TD3 (td3_continuous_action.py) for Gymnasium 1.x, watched by rltrain's
`Watcher`: the lines marked `# rltrain` are all it adds to the plain script.
`rltrain diagnose cleanrl_td3` shows what it found. Exits 0 at the end, 3 when a rule or
`rltrain pause cleanrl_td3` paused it."""

import argparse
import dataclasses
import random
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

from rltrain.integrations import Watcher  # rltrain


@dataclass
class Args:
    env_id: str = "Pendulum-v1"
    total_timesteps: int = 20_000  # vector steps, as CleanRL's global_step counts them
    learning_rate: float = 3e-4
    num_envs: int = 1
    buffer_size: int = 1_000_000
    gamma: float = 0.99
    tau: float = 0.005
    batch_size: int = 256
    hidden: int = 256
    policy_noise: float = 0.2
    exploration_noise: float = 0.1
    learning_starts: int = 1_000
    policy_frequency: int = 2
    noise_clip: float = 0.5
    eval_every: int = 5_000
    seed: int = 1
    run_name: str = "cleanrl_td3"


def parse(argv: list[str] | None) -> Args:
    p = argparse.ArgumentParser(description=__doc__)
    for f in dataclasses.fields(Args):  # --env-id ..., each typed as its default
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(p.parse_args(argv)))


def make_env(env_id: str, seed: int, idx: int):
    def thunk() -> gym.Env:
        env = gym.make(env_id)
        env.action_space.seed(seed + idx)
        return env

    return thunk


class QNetwork(nn.Module):
    def __init__(self, env: gym.vector.VectorEnv, hidden: int) -> None:
        super().__init__()
        inputs = int(np.prod(env.single_observation_space.shape)
                     + np.prod(env.single_action_space.shape))
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(torch.cat([x, a], 1)))
        return self.fc3(F.relu(self.fc2(x)))


class Actor(nn.Module):
    def __init__(self, env: gym.vector.VectorEnv, hidden: int) -> None:
        super().__init__()
        space = env.single_action_space
        self.fc1 = nn.Linear(int(np.prod(env.single_observation_space.shape)), hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc_mu = nn.Linear(hidden, int(np.prod(space.shape)))
        self.register_buffer(
            "action_scale", torch.tensor((space.high - space.low) / 2.0, dtype=torch.float32))
        self.register_buffer(
            "action_bias", torch.tensor((space.high + space.low) / 2.0, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.fc_mu(F.relu(self.fc2(F.relu(self.fc1(x))))))
        return x * self.action_scale + self.action_bias


class ReplayBuffer:
    """CleanRL uses SB3's; this one keeps the example free of it."""

    def __init__(self, size: int, obs_dim: int, action_dim: int) -> None:
        self.widths = [obs_dim, obs_dim, action_dim, 1, 1]  # obs, next obs, action, reward, done
        self.rows = np.zeros((size, sum(self.widths)), np.float32)
        self.size, self.pos, self.full = size, 0, False

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        for row in np.concatenate([obs, next_obs, actions, rewards[:, None], dones[:, None]], 1):
            self.rows[self.pos] = row
            self.full = self.full or self.pos + 1 == self.size
            self.pos = (self.pos + 1) % self.size

    def sample(self, n: int) -> list[torch.Tensor]:
        picked = np.random.randint(0, self.size if self.full else self.pos, n)
        return torch.as_tensor(self.rows[picked]).split(self.widths, dim=1)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    # Gymnasium 1.x: SAME_STEP resets at once and keeps the true final obs in infos["final_obs"]
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, args.seed, i) for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    space = envs.single_action_space
    actor, target_actor = Actor(envs, args.hidden), Actor(envs, args.hidden)
    qf1, qf2 = QNetwork(envs, args.hidden), QNetwork(envs, args.hidden)
    qf1_target, qf2_target = QNetwork(envs, args.hidden), QNetwork(envs, args.hidden)
    target_actor.load_state_dict(actor.state_dict())
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()),
                             lr=args.learning_rate)
    actor_optimizer = optim.Adam(list(actor.parameters()), lr=args.learning_rate)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    rb = ReplayBuffer(args.buffer_size, obs_dim, int(np.prod(space.shape)))
    n = args.num_envs  # rltrain counts each env's steps: a vector step is n  # rltrain
    watcher = Watcher(actor, [qf1, qf2], envs.single_observation_space, space,  # rltrain
                      run_name=args.run_name, config={"algo": "td3", "num_envs": n,  # rltrain
        "env_name": args.env_id, "seed": args.seed, "gamma": args.gamma,  # rltrain
        "max_timesteps": args.total_timesteps * n, "replay_buffer_size": args.buffer_size,  #rltrain
        "learning_starts": args.learning_starts * n, "batch_size": args.batch_size,  # rltrain
        "tau": args.tau}, actor_target=target_actor,  # rltrain
        critic_target=[qf1_target, qf2_target])  # rltrain
    eval_env = gym.make(args.env_id)  # rltrain

    obs, _ = envs.reset(seed=args.seed)
    for global_step in range(args.total_timesteps):
        if global_step < args.learning_starts:
            actions = np.array([space.sample() for _ in range(envs.num_envs)])
        else:
            with torch.no_grad():
                actions = actor(torch.Tensor(obs))
                actions += torch.normal(0, actor.action_scale * args.exploration_noise)
                actions = actions.cpu().numpy().clip(space.low, space.high)

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        real_next_obs = next_obs.copy()
        for idx, done in enumerate(np.logical_or(terminations, truncations)):
            if done:
                real_next_obs[idx] = infos["final_obs"][idx]
        rb.add(obs, real_next_obs, actions, rewards, terminations)
        watcher.after_env_step(obs, actions, rewards, real_next_obs, terminations,  # rltrain
                               truncations)  # rltrain
        obs = next_obs

        if global_step > args.learning_starts:
            observations, next_observations, b_actions, b_rewards, dones = rb.sample(
                args.batch_size)
            with torch.no_grad():
                clipped_noise = (torch.randn_like(b_actions) * args.policy_noise).clamp(
                    -args.noise_clip, args.noise_clip) * target_actor.action_scale
                next_state_actions = (target_actor(next_observations) + clipped_noise).clamp(
                    envs.single_action_space.low[0], envs.single_action_space.high[0])
                qf1_next_target = qf1_target(next_observations, next_state_actions)
                qf2_next_target = qf2_target(next_observations, next_state_actions)
                min_qf_next_target = torch.min(qf1_next_target, qf2_next_target)
                next_q_value = (b_rewards.flatten()
                                + (1 - dones.flatten()) * args.gamma * min_qf_next_target.view(-1))

            qf1_a_values = qf1(observations, b_actions).view(-1)
            qf2_a_values = qf2(observations, b_actions).view(-1)
            qf_loss = (F.mse_loss(qf1_a_values, next_q_value)
                       + F.mse_loss(qf2_a_values, next_q_value))

            q_optimizer.zero_grad()
            qf_loss.backward()
            q_optimizer.step()

            actor_loss = None
            if global_step % args.policy_frequency == 0:
                actor_loss = -qf1(observations, actor(observations)).mean()
                actor_optimizer.zero_grad()
                actor_loss.backward()
                actor_optimizer.step()

                # update the target networks
                for net, target in ((actor, target_actor), (qf1, qf1_target), (qf2, qf2_target)):
                    for param, target_param in zip(net.parameters(), target.parameters(),
                                                   strict=True):
                        target_param.data.copy_(args.tau * param.data
                                                + (1 - args.tau) * target_param.data)
            watcher.after_update(critic_loss=qf_loss, actor_loss=actor_loss,  # rltrain
                                 q_mean=qf1_a_values.mean(),  # rltrain
                                 batch={"obs": observations, "dones": dones})  # rltrain

        if (global_step + 1) % args.eval_every == 0:  # rltrain
            watcher.evaluate(eval_env)  # rltrain
        if watcher.should_pause:  # a rule, or `rltrain pause RUN`: stop here  # rltrain
            watcher.pause(target_actor=target_actor, qf1_target=qf1_target,  # rltrain
                          qf2_target=qf2_target, q_optimizer=q_optimizer,  # rltrain
                          actor_optimizer=actor_optimizer)  # rltrain
            return 3  # rltrain

    envs.close()
    watcher.close()  # rltrain
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
