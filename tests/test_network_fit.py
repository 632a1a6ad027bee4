"""Do the networks do their jobs? The critic's fit of its targets and the actor's rank
among actions by its critic's values (measure/fit.py), and the rules that judge them
(critic_fit, actor_fit, actor_direction), on networks whose answers are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.measure.fit import actor_rank, critic_fit, reference_fit
from rltrain.utils.diagnosis.rules.fit_rules import ActorDirection, ActorFit, CriticFit
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.agent_view import AgentView
from rltrain.utils.training.replay_buffer import Batch

from conftest import tiny_config


class Best(nn.Module):
    """The action the toy critic values most: a = tanh(s0)."""

    def __init__(self, sign: float = 1.0) -> None:
        super().__init__()
        self.sign = sign

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.sign * torch.tanh(obs[:, :1])


def view_of(actor: nn.Module, q) -> AgentView:
    return AgentView(actor=actor, critic=nn.Identity(), q_value=q,
                     act=lambda o: o, probe=lambda b: None, updates=lambda: 0,
                     networks=lambda: {}, action_low=np.array([-1.0], np.float32),
                     action_high=np.array([1.0], np.float32), device=torch.device("cpu"))


def toy_q(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Q(s, a) = s1 - (a - tanh(s0))^2: a state value and a peak at the best action."""
    return obs[:, 1:2] - (action - torch.tanh(obs[:, :1])).square()


def batch(rows: int = 512, seed: int = 0) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(rows, 2, generator=gen)
    actions = torch.rand(rows, 1, generator=gen) * 2 - 1
    next_obs = torch.randn(rows, 2, generator=gen)
    return Batch(obs, actions, torch.zeros(rows, 1), next_obs, torch.zeros(rows, 1))


def test_an_actor_at_its_critics_best_action_ranks_at_the_top_and_one_at_its_worst_last():
    gen = torch.Generator().manual_seed(0)
    obs = batch().obs
    best = actor_rank(view_of(Best(), toy_q), obs, gen, target_std=1.0)
    worst = actor_rank(view_of(Best(-1.0), toy_q), obs, gen, target_std=1.0)
    assert best["rank"] > 0.95 and best["gap"] < 0.01 and best["z"] > 0.5
    assert worst["rank"] < 0.3 and worst["z"] < 0


def test_a_critic_that_is_its_own_target_explains_it_and_one_off_by_noise_does_not():
    b = batch()
    gamma = 0.9

    def fitted(obs, action):  # Q = r + gamma Q(s', pi(s')) holds: r = 0 and Q(s') = 0
        return torch.zeros(len(obs), 1)

    def noisy(obs, action):
        return torch.randn(len(obs), 1, generator=torch.Generator().manual_seed(len(obs)))

    rewards = torch.randn(len(b.obs), 1, generator=torch.Generator().manual_seed(3))
    with_reward = b._replace(rewards=rewards)
    assert critic_fit(view_of(Best(), noisy), with_reward, gamma)["explained"] < 0.5

    def matches(obs, action):  # Q(s, a) = r exactly, Q(s', .) tiny: explains nearly all
        rows = torch.arange(len(obs))
        return rewards[rows % len(rewards)] if obs.data_ptr() == b.obs.data_ptr() else \
            torch.zeros(len(obs), 1)

    assert critic_fit(view_of(Best(), matches), with_reward, gamma)["explained"] > 0.99
    assert critic_fit(view_of(Best(), fitted), b, gamma)["explained"] != \
        critic_fit(view_of(Best(), fitted), b, gamma)["explained"]  # no spread: NaN


def rules(tmp_path: Path, **overrides) -> dict:
    context = RuleContext(tiny_config(tmp_path, **overrides), 3, 1)
    return {cls.spec.name: cls(context) for cls in (CriticFit, ActorFit, ActorDirection)}


def feed(rule, stats: dict, times: int, start: int = 2000, every: int = 500) -> list:
    return [f for k in range(times) for f in rule.check(start + k * every, start + k * every,
                                                         stats)]


GOOD = {"explained": 0.99, "td_rms": 0.1, "target_std": 10.0, "rank": 0.97,
        "action_spread": 0.05, "gap": 0.0, "z": 1.5}


def test_healthy_networks_raise_nothing(tmp_path):
    for rule in rules(tmp_path).values():
        assert feed(rule, GOOD, 10) == []


def test_a_critic_too_small_to_fit_is_named_with_wider_layers(tmp_path):
    rule = rules(tmp_path, hidden_sizes=[4])["critic_fit"]
    found = feed(rule, {**GOOD, "explained": 0.2}, 3)
    assert len(found) == 1 and found[0].suggested_set == {"hidden_sizes": [256, 256]}
    assert feed(rule, {**GOOD, "explained": 0.2}, 2) == []  # as many again before the next


def test_a_critic_with_usual_settings_that_cannot_fit_names_its_targets(tmp_path):
    found = feed(rules(tmp_path, hidden_sizes=[64, 64])["critic_fit"],
                 {**GOOD, "explained": 0.1}, 3)
    assert found and found[0].suggested_set == {} and "noisy reward" in found[0].message


def test_an_actor_that_cannot_reach_its_critics_best_is_named_with_its_far_settings(tmp_path):
    small = rules(tmp_path, networks={"actor": {"hidden_sizes": [2]}})["actor_fit"]
    found = feed(small, {**GOOD, "rank": 0.5}, 3)
    assert found and found[0].suggested_set == {"networks.actor.hidden_sizes": [256, 256]}
    slow = rules(tmp_path, algo="td3", td3={"policy_delay": 100},
                 hidden_sizes=[64, 64])["actor_fit"]
    assert feed(slow, {**GOOD, "rank": 0.5}, 3)[0].suggested_set == {"td3.policy_delay": 2}
    assert found[0].action == "warn"


def test_a_low_rank_with_usual_settings_is_a_note(tmp_path):
    """Late in a healthy Pendulum DDPG run (pendulum_ddpg.yaml) the rank fell to 0.66."""
    usual = rules(tmp_path, hidden_sizes=[64, 64])["actor_fit"]
    found = feed(usual, {**GOOD, "rank": 0.66}, 3)
    assert found and found[0].action == "info" and found[0].suggested_set == {}


def test_an_actor_that_descends_its_critic_is_named_by_direction_not_fit(tmp_path):
    found = rules(tmp_path)
    worst = {**GOOD, "rank": 0.05}
    assert feed(found["actor_direction"], worst, 3)
    assert feed(found["actor_fit"], worst, 3) == []


def test_an_actor_valued_well_under_the_uniform_actions_mean_descends(tmp_path):
    """A rank over 0.25 (states where the critic values actions nearly alike) but the
    action half a std or more under the uniform actions' mean: descending. A random
    actor sits at about 0 and is not named."""
    found = rules(tmp_path)
    assert feed(found["actor_direction"], {**GOOD, "rank": 0.29, "z": -0.7}, 3)
    assert feed(found["actor_direction"], {**GOOD, "rank": 0.45, "z": -0.2}, 5) == []
    assert feed(found["actor_direction"], {**GOOD, "rank": 0.6, "z": 0.3}, 5) == []


@pytest.mark.parametrize("stats", [{**GOOD, "rank": 0.05, "action_spread": 0.0},
                                   {**GOOD, "explained": float("nan")}])
def test_a_critic_that_values_every_action_alike_is_not_judged(tmp_path, stats):
    judged = rules(tmp_path)
    assert feed(judged["actor_direction"], stats, 5) == []
    assert feed(judged["critic_fit"], {**stats, "explained": float("nan")}, 5) == []


def test_targets_alike_in_every_state_leave_the_critic_unjudged(tmp_path):
    """InvertedPendulum balanced for good: targets about 100 everywhere with a std of
    0.25; a TD error of 0.5 explains -0.29 of that spread and is still a 0.5% error."""
    rule = rules(tmp_path)["critic_fit"]
    solved = {**GOOD, "explained": -0.29, "td_rms": 0.506, "target_std": 0.254,
              "target_size": 99.5}
    assert feed(rule, solved, 5) == []
    assert len(feed(rule, {**solved, "target_std": 2.0}, 3)) == 1  # 2% of their size
    b = batch()
    measured = critic_fit(view_of(Best(), lambda o, a: torch.ones(len(o), 1)), b, 0.5)
    assert measured["target_size"] == pytest.approx(
        float((b.rewards + 0.5 * (1 - b.terminated)).abs().mean()))


def test_nothing_is_judged_before_min_updates(tmp_path):
    rule = rules(tmp_path)["critic_fit"]
    assert feed(rule, {**GOOD, "explained": 0.0}, 3, start=0, every=100) == []
    assert rule.unjudged() is not None
    assert config_from_dict({}).diagnostics.critic_fit.min_updates > 300


def test_a_plain_regression_fits_a_smooth_target_and_not_noise_on_rows_it_never_saw():
    gen = torch.Generator().manual_seed(1)
    inputs = torch.randn(2048, 4, generator=gen)
    smooth = (torch.sin(2 * inputs[:, 0]) + inputs[:, 1] * inputs[:, 2]).double()
    coarse = 0.5 * smooth  # a critic that fits half of every value
    held, reference = reference_fit(inputs, smooth, coarse)
    assert reference > 0.85 and held == pytest.approx(0.75, abs=0.05)
    noise = torch.randn(2048, generator=gen).double()
    held, reference = reference_fit(inputs, noise, noise)
    assert reference < 0.2 and held == pytest.approx(1.0)
    broken = smooth.clone()
    broken[5] = float("nan")  # a NaN target (a diverged critic): not compared
    assert all(v != v for v in reference_fit(inputs, broken, coarse))
    flat = torch.zeros(2048, dtype=torch.float64)
    flat[-128:] = 1.0  # alike on the rows that fit and choose: no regression is chosen
    held, reference = reference_fit(inputs, flat, flat)
    assert held == pytest.approx(1.0) and reference != reference
    assert reference_fit(inputs, smooth.float(), coarse.float())[1] > 0.85  # float32 in


def test_the_regression_runs_only_where_the_critic_leaves_enough_unexplained():
    b = batch()
    rewards = torch.randn(len(b.obs), 1, generator=torch.Generator().manual_seed(3))
    view = view_of(Best(), lambda o, a: torch.zeros(len(o), 1))
    assert "reference_explained" not in critic_fit(view, b._replace(rewards=rewards), 0.9)
    measured = critic_fit(view, b._replace(rewards=rewards), 0.9, reference_below=0.985)
    assert measured["explained"] < 0.985 and "reference_explained" in measured


OUTFITTED = {**GOOD, "explained": 0.93, "held_explained": 0.92, "reference_explained": 0.99}


def test_a_critic_a_plain_regression_outfits_is_named_with_wider_layers(tmp_path):
    """The critic explains 0.92 (over the threshold) where a regression explains 0.99:
    the targets can be fitted; usual widths are doubled, far too small ones raised."""
    usual = feed(rules(tmp_path, hidden_sizes=[64, 64])["critic_fit"], OUTFITTED, 3)
    assert len(usual) == 1
    assert usual[0].suggested_set == {"networks.critic.hidden_sizes": [128, 128]}
    assert "plain regression" in usual[0].message
    assert usual[0].value == {"unexplained": 0.08, "regression_unexplained": 0.01}
    uneven = feed(rules(tmp_path, hidden_sizes=[2048, 64])["critic_fit"], OUTFITTED, 3)
    assert uneven[0].suggested_set == {"networks.critic.hidden_sizes": [2048, 128]}
    widest = feed(rules(tmp_path, hidden_sizes=[1024, 1024])["critic_fit"], OUTFITTED, 3)
    assert widest[0].suggested_set == {} and "already as wide" in widest[0].message
    tiny = feed(rules(tmp_path, hidden_sizes=[4])["critic_fit"], OUTFITTED, 3)
    assert tiny[0].suggested_set == {"hidden_sizes": [256, 256]}
    chasing = feed(rules(tmp_path, hidden_sizes=[64, 64], actor_lr=0.01, critic_lr=1e-4)
                   ["critic_fit"], OUTFITTED, 3)
    assert chasing[0].suggested_set == {} and "slower than its actor" in chasing[0].message


def test_the_two_streaks_are_counted_apart(tmp_path):
    """Two measurements under the threshold, then one the regression outfits: neither
    streak is 3 long, and the finding that comes names the streak that fired."""
    rule = rules(tmp_path, hidden_sizes=[64, 64])["critic_fit"]
    low = {**GOOD, "explained": 0.2}
    assert feed(rule, low, 2) + feed(rule, OUTFITTED, 1, start=3000) == []
    found = feed(rule, OUTFITTED, 2, start=3500)
    assert len(found) == 1 and "plain regression" in found[0].message
    assert rule.state_dict()["outfit"] == 0


@pytest.mark.parametrize("stats", [
    {**OUTFITTED, "reference_explained": 0.95},  # unexplained 0.08 against 0.05: x1.6
    {**OUTFITTED, "held_explained": 0.98, "reference_explained": 0.999},  # under 0.03
    {**OUTFITTED, "reference_explained": float("nan")}])
def test_a_critic_no_worse_than_the_regression_or_close_to_its_targets_is_not_named(
        tmp_path, stats):
    assert feed(rules(tmp_path, hidden_sizes=[64, 64])["critic_fit"], stats, 5) == []
