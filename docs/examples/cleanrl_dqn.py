"""A CleanRL-style DQN loop (after CleanRL's dqn.py) for Gymnasium 1.x, watched by
rltrain's `Watcher`: the lines marked `# rltrain` are all it adds to the plain script.
`rltrain diagnose cleanrl_dqn` shows what it found. Exits 0 at the end, 3 when a rule or
`rltrain pause cleanrl_dqn` paused it; `--continue-from FILE` (the file the pause
saved) goes on with the run."""

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
    env_id: str = "CartPole-v1"
    total_timesteps: int = 500_000  # vector steps, as CleanRL's global_step counts them
    learning_rate: float = 2.5e-4
    num_envs: int = 1
    buffer_size: int = 10_000
    gamma: float = 0.99
    tau: float = 1.0  # 1: the target network is copied every target_network_frequency
    target_network_frequency: int = 500
    batch_size: int = 128
    start_e: float = 1.0
    end_e: float = 0.05
    exploration_fraction: float = 0.5
    learning_starts: int = 10_000
    train_frequency: int = 10
    hidden: int = 120
    seed: int = 1
    run_name: str = "cleanrl_dqn"
    continue_from: str = ""  # a paused run's saved state: go on from it


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


class QNetwork(nn.Sequential):
    def __init__(self, env: gym.vector.VectorEnv, hidden: int) -> None:
        super().__init__(
            nn.Linear(int(np.prod(env.single_observation_space.shape)), hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, int(env.single_action_space.n)))


def linear_schedule(start_e: float, end_e: float, duration: int, t: int) -> float:
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class ReplayBuffer:
    """CleanRL uses SB3's; this one keeps the example free of it (and saves with a pause)."""

    def __init__(self, size: int, obs_dim: int) -> None:
        self.widths = [obs_dim, obs_dim, 1, 1, 1]  # obs, next obs, action, reward, done
        self.rows = np.zeros((size, sum(self.widths)), np.float32)
        self.size, self.pos, self.full = size, 0, False

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        for row in np.concatenate([obs, next_obs, actions[:, None], rewards[:, None],
                                   dones[:, None]], 1):
            self.rows[self.pos] = row
            self.full = self.full or self.pos + 1 == self.size
            self.pos = (self.pos + 1) % self.size

    def sample(self, n: int) -> list[torch.Tensor]:
        picked = np.random.randint(0, self.size if self.full else self.pos, n)
        return torch.as_tensor(self.rows[picked]).split(self.widths, dim=1)

    def state_dict(self) -> dict:
        filled = self.size if self.full else self.pos
        return {"rows": torch.as_tensor(self.rows[:filled]), "pos": self.pos, "full": self.full}

    def load_state_dict(self, state: dict) -> None:
        rows = state["rows"].numpy()
        self.rows[:len(rows)] = rows
        self.pos, self.full = state["pos"], state["full"]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    # Gymnasium 1.x: SAME_STEP resets at once and keeps the true final obs in infos["final_obs"]
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, args.seed, i) for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    q_network = QNetwork(envs, args.hidden)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(envs, args.hidden)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, int(np.prod(envs.single_observation_space.shape)))
    start = 0
    if args.continue_from:  # a paused run: its networks, optimiser, buffer and step
        state = torch.load(args.continue_from, weights_only=True)
        q_network.load_state_dict(state["critic"])
        target_network.load_state_dict(state["target_network"])
        optimizer.load_state_dict(state["optimizer"])
        rb.load_state_dict(state["rb"])
        start = state["env_steps"] // args.num_envs
    n = args.num_envs  # rltrain counts each env's steps: a vector step is n  # rltrain
    watcher = Watcher(None, q_network, envs.single_observation_space,  # rltrain
        envs.single_action_space, run_name=args.run_name, config={"algo": "dqn",  # rltrain
        "num_envs": n, "env_name": args.env_id, "seed": args.seed, "gamma": args.gamma,  # rltrain
        "max_timesteps": args.total_timesteps * n, "batch_size": args.batch_size,  # rltrain
        "replay_buffer_size": args.buffer_size, "tau": args.tau,  # rltrain
        "learning_starts": args.learning_starts * n}, critic_target=target_network,  # rltrain
        continue_from=args.continue_from or None)  # rltrain

    obs, _ = envs.reset(seed=args.seed)
    for global_step in range(start, args.total_timesteps):
        epsilon = linear_schedule(args.start_e, args.end_e,
                                  int(args.exploration_fraction * args.total_timesteps),
                                  global_step)
        if random.random() < epsilon:
            actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
        else:
            q_values = q_network(torch.Tensor(obs))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        real_next_obs = next_obs.copy()
        for idx, done in enumerate(np.logical_or(terminations, truncations)):
            if done:
                real_next_obs[idx] = infos["final_obs"][idx]
        watcher.after_env_step(obs, actions, rewards, real_next_obs, terminations,  # rltrain
                               truncations)  # rltrain
        if watcher.should_pause:  # a rule, or `rltrain pause RUN`: stop here  # rltrain
            watcher.pause(target_network=target_network, optimizer=optimizer,  # rltrain
                          rb=rb)  # this step's transition not stored  # rltrain
            envs.close()  # rltrain
            return 3  # rltrain
        rb.add(obs, real_next_obs, actions, rewards, terminations)
        obs = next_obs

        if global_step > args.learning_starts:
            if global_step % args.train_frequency == 0:
                observations, next_observations, b_actions, b_rewards, dones = rb.sample(
                    args.batch_size)
                with torch.no_grad():
                    target_max, _ = target_network(next_observations).max(dim=1)
                    td_target = b_rewards.flatten() + args.gamma * target_max * (
                        1 - dones.flatten())
                old_val = q_network(observations).gather(1, b_actions.long()).squeeze()
                loss = F.mse_loss(td_target, old_val)

                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                watcher.after_update(critic_loss=loss, q_mean=old_val.mean(),  # rltrain
                                     epsilon=epsilon,  # rltrain
                                     batch={"obs": observations, "dones": dones})  # rltrain

            # update the target network
            if global_step % args.target_network_frequency == 0:
                for target_param, param in zip(target_network.parameters(),
                                               q_network.parameters(), strict=True):
                    target_param.data.copy_(args.tau * param.data
                                            + (1.0 - args.tau) * target_param.data)

    envs.close()
    watcher.close()  # rltrain
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
