"""A CleanRL-style PPO loop (after CleanRL's ppo.py) for Gymnasium 1.x, watched by
rltrain's `Watcher`: the lines marked `# rltrain` are all it adds to the plain script.
`rltrain diagnose cleanrl_ppo` shows what it found. Exits 0 at the end, 3 when a rule or
`rltrain pause cleanrl_ppo` paused it: a rule at once, dropping the rollout that holds
what it found; `rltrain pause` once the rollout it came in has been trained on.
`--continue-from FILE` (the file the pause saved) goes on with the run."""

import argparse
import dataclasses
import random
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn, optim
from torch.distributions.categorical import Categorical

from rltrain.integrations import Watcher  # rltrain


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 500_000  # env steps, all envs together
    learning_rate: float = 2.5e-4
    num_envs: int = 4
    num_steps: int = 128  # steps of each env in a rollout
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    seed: int = 1
    run_name: str = "cleanrl_ppo"
    continue_from: str = ""  # a paused run's saved state: go on from it


def parse(argv: list[str] | None) -> Args:
    p = argparse.ArgumentParser(description=__doc__)
    for f in dataclasses.fields(Args):  # --env-id ..., each typed as its default
        kind = type(f.default) if not isinstance(f.default, bool) else (
            lambda text: text.lower() in ("1", "true", "yes"))
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default)
    return Args(**vars(p.parse_args(argv)))


def make_env(env_id: str, seed: int, idx: int):
    def thunk() -> gym.Env:
        env = gym.make(env_id)
        env.action_space.seed(seed + idx)
        return env

    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv, hidden: int) -> None:
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, int(envs.single_action_space.n)), std=0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def compute_gae(args: Args, rewards, values, dones, truncated_values, next_value,
                next_done) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and the returns they give, [num_steps, num_envs]."""
    with torch.no_grad():
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(args.num_steps)):
            if t == args.num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = (rewards[t] + args.gamma * truncated_values[t]
                     + args.gamma * nextvalues * nextnonterminal - values[t])
            advantages[t] = lastgaelam = (
                delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam)
    return advantages, advantages + values


def minibatch_losses(args: Args, agent: Agent, mb_inds, b_obs, b_actions, b_logprobs,
                     b_advantages, b_returns, b_values) -> tuple:
    """PPO's loss on one minibatch, its terms, and the approximate KL and clip fraction."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(
        b_obs[mb_inds], b_actions.long()[mb_inds])
    logratio = newlogprob - b_logprobs[mb_inds]
    ratio = logratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()

    mb_advantages = b_advantages[mb_inds]
    if args.norm_adv:
        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

    # Policy loss
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

    # Value loss
    newvalue = newvalue.view(-1)
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
        v_clipped = b_values[mb_inds] + torch.clamp(
            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

    entropy_loss = entropy.mean()
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    return loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    # Gymnasium 1.x: SAME_STEP resets at once and keeps the true final obs in infos["final_obs"]
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, args.seed, i) for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = Agent(envs, args.hidden)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    global_step, first = 0, 1
    if args.continue_from:  # a paused run: its networks, optimiser and step
        state = torch.load(args.continue_from, weights_only=True)
        agent.actor.load_state_dict(state["actor"])
        agent.critic.load_state_dict(state["critic"])
        optimizer.load_state_dict(state["optimizer"])
        global_step = state["env_steps"]
        first = global_step // batch_size + 1  # a rollout cut short is collected again
    watcher = Watcher(agent.actor, agent.critic, envs.single_observation_space,  # rltrain
        envs.single_action_space, run_name=args.run_name, config={"algo": "ppo",  # rltrain
        "num_envs": args.num_envs, "env_name": args.env_id, "seed": args.seed,  # rltrain
        "gamma": args.gamma, "max_timesteps": args.total_timesteps,  # rltrain
        "batch_size": minibatch_size, "replay_buffer_size": batch_size},  # rltrain
        continue_from=args.continue_from or None)  # rltrain

    def pause() -> int:  # the networks as the latest update left them  # rltrain
        watcher.pause(optimizer=optimizer)  # rltrain
        envs.close()  # rltrain
        return 3  # rltrain

    shape = (args.num_steps, args.num_envs)
    obs = torch.zeros(shape + envs.single_observation_space.shape)
    actions = torch.zeros(shape + envs.single_action_space.shape)
    logprobs, rewards, dones, values = (torch.zeros(shape) for _ in range(4))
    # V of the true final observation where a time limit cut the episode (CleanRL's ppo.py
    # treats a time limit as a termination: it bootstraps from nothing there)
    truncated_values = torch.zeros(shape)

    next_obs, _ = envs.reset(seed=args.seed)
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(args.num_envs)
    for iteration in range(first, num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob

            o, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            real_next_obs = o.copy()
            for idx in np.flatnonzero(np.logical_or(terminations, truncations)):
                real_next_obs[idx] = infos["final_obs"][idx]
            with torch.no_grad():  # bootstrap through a time limit, not a termination
                cut = torch.as_tensor(truncations & ~terminations, dtype=torch.float32)
                truncated_values[step] = cut * agent.get_value(
                    torch.Tensor(real_next_obs)).flatten()
            watcher.after_env_step(obs[step].numpy(), action.numpy(), reward,  # rltrain
                                   real_next_obs, terminations, truncations)  # rltrain
            if watcher.pause_is_urgent:  # a rule: train on none of this rollout  # rltrain
                return pause()  # rltrain
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.Tensor(o)
            next_done = torch.as_tensor(np.logical_or(terminations, truncations),
                                        dtype=torch.float32)

        with torch.no_grad():  # bootstrap value if not done
            next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages, returns = compute_gae(args, rewards, values, dones, truncated_values,
                                          next_value, next_done)

        # flatten the batch
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        var_y = np.var(y_true)
        explained_var = None if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # Optimizing the policy and value network
        b_inds = np.arange(batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, minibatch_size):
                mb_inds = b_inds[start:start + minibatch_size]
                loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac = minibatch_losses(
                    args, agent, mb_inds, b_obs, b_actions, b_logprobs, b_advantages,
                    b_returns, b_values)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                watcher.after_update(critic_loss=v_loss, actor_loss=pg_loss,  # rltrain
                    entropy_loss=-entropy_loss, approx_kl=approx_kl,  # rltrain
                    clip_fraction=clipfrac, explained_variance=explained_var)  # rltrain

        if watcher.should_pause:  # `rltrain pause`: after this rollout's update  # rltrain
            return pause()  # rltrain

    envs.close()
    watcher.close()  # rltrain
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
