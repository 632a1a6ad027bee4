"""Set-up faults judged by their mechanism: noise that swamps what it is added to
(excess_noise, target_smoothing), SAC's temperature against what its policy can do
(entropy_temperature), and batches too small for the critic's gradient noise
(gradient_noise): each fires on its planted fault with the right key and direction,
and stays quiet on RL Zoo's settings."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from rltrain.scripts.training.agent_setup import agent_view, build_agent
from rltrain.utils.diagnosis.measure.gradient_noise import LARGE, noise_terms
from rltrain.utils.diagnosis.rules.entropy_temperature import EntropyTemperature
from rltrain.utils.diagnosis.rules.gradient_noise import GradientNoise
from rltrain.utils.diagnosis.rules.noise_rules import (
    ExcessNoise,
    TargetSmoothing,
    clipped_share,
    smoothing_std,
)
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.hooks.hook import Step, Update
from rltrain.utils.training.replay_buffer import Batch

from conftest import tiny_config

LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)


def first_update(rule_cls, tmp_path: Path, **overrides) -> list:
    rule = rule_cls(RuleContext(tiny_config(tmp_path, **overrides), 3, 1))
    found = rule.on_update(Update(100, 1, {}))
    assert rule.on_update(Update(101, 2, {})) == []  # judged once
    return found


def test_the_clipped_share_and_the_smoothing_std_are_the_normal_laws():
    assert clipped_share(1.0) == pytest.approx(0.3173, abs=1e-4)  # P(|N(0,1)| > 1)
    assert clipped_share(0.0) == 0.0
    assert smoothing_std(0.2, 0.5) == pytest.approx(0.2, abs=0.005)  # the clip rarely acts
    assert smoothing_std(3.0, 0.5) == pytest.approx(0.477, abs=0.005)  # mostly clipped
    assert smoothing_std(1.0, 100.0) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("overrides, fires", [
    ({"exploration_noise": 3.0}, True),
    ({"exploration_noise": 2.0, "noise_type": "gaussian"}, True),
    ({"exploration_noise": 0.1}, False),
    # RL Zoo's MountainCar: OU sigma 0.5, stationary std 0.91, about 27% clipped
    ({"exploration_noise": 0.5, "noise_type": "ou"}, False),
    ({"algo": "sac"}, False),  # SAC adds no action noise (the config refuses one)
])
def test_exploration_noise_that_clips_most_actions_is_named(tmp_path, overrides, fires):
    found = first_update(ExcessNoise, tmp_path, **overrides)
    assert bool(found) == fires
    if fires:
        assert found[0].suggested_set["exploration_noise"] < overrides["exploration_noise"]


@pytest.mark.parametrize("noise, clip, fires", [(3.0, 3.0, True), (0.2, 0.5, False),
                                                (1.0, 0.3, False)])
def test_target_smoothing_larger_than_the_action_range_is_named(tmp_path, noise, clip, fires):
    found = first_update(TargetSmoothing, tmp_path, algo="td3",
                         td3={"target_policy_noise": noise, "target_noise_clip": clip})
    assert bool(found) == fires
    if fires:
        assert found[0].suggested_set["td3.target_policy_noise"] < noise
    assert first_update(TargetSmoothing, tmp_path / "ddpg") == []  # DDPG smooths nothing


def sac_rule(tmp_path: Path, **sac) -> EntropyTemperature:
    config = tiny_config(tmp_path, algo="sac", sac=sac)
    return EntropyTemperature(RuleContext(config, 3, 1))


def feed(rule: EntropyTemperature, entropies: list[float], alphas: list[float]) -> list:
    found, every = [], rule.settings.every_updates
    for k, (entropy, alpha) in enumerate(zip(entropies, alphas, strict=True), start=1):
        updates = rule.settings.min_updates + k * every
        found += rule.on_update(Update(updates, updates, {"entropy": entropy,
                                                           "ent_coef": alpha}))
    return found


def test_a_target_entropy_no_policy_reaches_is_named_at_the_first_update(tmp_path):
    rule = sac_rule(tmp_path, target_entropy=5.0)
    found = rule.on_update(Update(100, 1, {"entropy": 0.5, "ent_coef": 1.0}))
    assert found and found[0].suggested_set == {"sac.target_entropy": -1.0}
    assert sac_rule(tmp_path / "b", target_entropy=0.5).on_update(Update(100, 1, {})) == []


def test_a_learnt_temperature_that_runs_away_is_named(tmp_path):
    rule = sac_rule(tmp_path, target_entropy=0.6)  # reachable only by a near-uniform policy
    found = feed(rule, [0.3, 0.35], [5.0, 150.0])
    assert len(found) == 1 and "runs away" in found[0].message
    assert found[0].suggested_set["sac.target_entropy"] < 0.6


def rewarded(rule: EntropyTemperature, rewards: np.ndarray) -> EntropyTemperature:
    for k, reward in enumerate(rewards):
        rule.on_step(Step(k + 1, 0, np.zeros(3), np.zeros(1), float(reward), np.zeros(3),
                          False, False, True))
    return rule


def test_a_fixed_temperature_that_keeps_the_policy_random_is_named(tmp_path):
    uniform = math.log(2.0)
    pendulum = -np.linspace(0.0, 10.0, 1000)  # rewards spread over 9 a step
    rule = rewarded(sac_rule(tmp_path, ent_coef=20.0), pendulum)  # a bonus up to 13.9
    found = feed(rule, [uniform - 0.02] * 3, [20.0] * 3)
    assert len(found) == 1 and found[0].suggested_set["sac.ent_coef"] < 20.0
    assert "outweighs the 9 the rewards spread over a step" in found[0].message
    alive = rewarded(sac_rule(tmp_path / "alive", ent_coef=20.0), np.ones(1000))
    assert len(feed(alive, [uniform - 0.02] * 3, [20.0] * 3)) == 1  # 13.9 against 1


def test_a_random_policy_under_a_bonus_below_the_rewards_spread_is_not_named(tmp_path):
    """MountainCar's control cost, -0.1 a^2 a step, spreads over about 0.09; RL Zoo's
    fixed 0.1 pays at most 0.069: the policy stays random because nothing in the reward
    tells the actions apart before the goal is found, not because of the temperature."""
    uniform = math.log(2.0)
    actions = np.random.default_rng(0).uniform(-1, 1, 5000)
    rule = rewarded(sac_rule(tmp_path, ent_coef=0.1), -0.1 * actions ** 2)
    assert feed(rule, [uniform - 0.02] * 6, [0.1] * 6) == []
    healthy = sac_rule(tmp_path / "auto")  # learnt, target -1: the entropy falls
    assert feed(healthy, [0.6, 0.2, -0.4, -0.9], [0.9, 0.5, 0.2, 0.1]) == []


def test_the_noise_scale_of_a_known_gradient_noise_is_recovered():
    """A probe whose per-sample gradient is g + noise: |G|^2 and tr(S) come back."""
    signal, noise_var = torch.tensor([3.0, 4.0]), 2.0  # |G|^2 = 25, tr(S) = 4

    class Probe:
        def __init__(self, layers):
            self.critic_layers = self.actor_layers = layers

    def probe(batch: Batch) -> Probe:
        per_sample = signal + batch.obs[:, :2] * math.sqrt(noise_var)  # obs ~ N(0, 1)
        mean = per_sample.mean(dim=0)
        return Probe({"w0": float(mean[0]), "w1": float(mean[1])})

    gen = torch.Generator().manual_seed(0)
    estimates = []
    for _ in range(200):
        obs = torch.randn(LARGE, 2, generator=gen)
        batch = Batch(obs, obs[:, :1], obs[:, :1], obs, obs[:, :1])
        estimates.append(noise_terms(probe, batch)["critic"])
    signal_sq, trace = np.mean(estimates, axis=0)
    assert signal_sq == pytest.approx(25.0, rel=0.1)
    assert trace == pytest.approx(2 * noise_var, rel=0.15)


def test_batches_far_under_the_noise_scale_are_named_with_a_larger_batch(tmp_path):
    small = GradientNoise(RuleContext(tiny_config(tmp_path, batch_size=2), 3, 1))
    assert small.check(100, ratio=400.0, scale=800.0, measured=1) == []  # too few yet
    found = small.check(200, ratio=400.0, scale=800.0, measured=2)
    assert found and found[0].suggested_set["batch_size"] > 2
    assert found[0].action == "warn"  # a batch of 2 is far under any usual one
    four = GradientNoise(RuleContext(tiny_config(tmp_path, batch_size=4), 3, 1))
    assert four.check(200, ratio=3.5, scale=14.0, measured=2) == []  # noise 3.5x signal
    assert four.check(300, ratio=6.1, scale=24.4, measured=3)  # LunarLander SAC's, batch 4
    usual = GradientNoise(RuleContext(tiny_config(tmp_path, batch_size=256), 3, 1))
    assert usual.check(200, ratio=2.0, scale=512.0, measured=5) == []
    # a usual batch's note needs 10 times: healthy runs at 256 reach 7.9
    assert usual.check(250, ratio=7.9, scale=2022.0, measured=5) == []
    noted = usual.check(300, ratio=199.0, scale=5.1e4, measured=6)  # healthy LunarLander
    assert noted and noted[0].action == "info"


def test_the_noise_measure_runs_on_a_real_agent_without_touching_its_streams(tmp_path):
    config = tiny_config(tmp_path)
    agent, _ = build_agent(config, 3, LOW, HIGH, torch.device("cpu"))
    view = agent_view(agent, LOW, HIGH)
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(LARGE, 3, generator=gen)
    batch = Batch(obs, torch.rand(LARGE, 1, generator=gen) * 4 - 2,
                  torch.randn(LARGE, 1, generator=gen), obs + 0.1, torch.zeros(LARGE, 1))
    before = [p.clone() for p in agent.critic.parameters()]
    terms = noise_terms(view.probe, batch)
    assert set(terms) == {"critic", "actor"}
    signal, trace = terms["critic"]
    assert math.isfinite(signal) and trace > 0
    assert all(torch.equal(a, b) for a, b in zip(before, agent.critic.parameters(),
                                                     strict=True))


def pace_rule(tmp_path: Path, **overrides):
    from rltrain.utils.diagnosis.rules.actor_stalled import ActorPace

    return ActorPace(RuleContext(tiny_config(tmp_path, **overrides), 3, 1))


def judge_pace(rule, change: float, critic_change: float, times: int) -> list:
    return [f for k in range(times) for f in rule.judge(1000 + k, change, critic_change)]


def test_an_actor_far_faster_than_its_critic_is_named_with_the_rates(tmp_path):
    rule = pace_rule(tmp_path, actor_lr=1e-2, critic_lr=1e-5)
    measurements = rule.settings.measurements
    found = judge_pace(rule, 1e-2, 1e-6, measurements)  # a pace of 10,000
    assert len(found) == 1 and found[0].suggested_set == {"actor_lr": 1e-5}
    assert judge_pace(rule, 1e-2, 1e-6, measurements - 1) == []  # as many again


def test_an_actor_far_slower_than_its_critic_is_named_with_the_delay(tmp_path):
    rule = pace_rule(tmp_path, algo="td3", td3={"policy_delay": 100})
    found = judge_pace(rule, 1e-8, 1e-4, rule.settings.measurements)  # a pace of 1e-4
    assert found and found[0].suggested_set == {"td3.policy_delay": 2}


def test_a_healthy_pace_or_an_actor_that_does_not_move_at_all_is_not_named(tmp_path):
    rule = pace_rule(tmp_path)
    assert judge_pace(rule, 1e-4, 3e-4, 10) == []  # a pace of 0.33
    assert judge_pace(rule, 0.0, 3e-4, 10) == []  # actor_stalled's case, not the pace's
    flipping = [1e-2, 1e-9] * 5  # out of pace both ways, never the same way in a row
    assert [f for k, c in enumerate(flipping) for f in rule.judge(k, c, 1e-4)] == []


class BoundView:
    """A policy at `action` everywhere on [-2, 2] (2.0: at the upper bound) and a critic
    that the test moves by hand."""

    def __init__(self, action: float = 2.0) -> None:
        self.action_low, self.action_high, self.device = LOW, HIGH, torch.device("cpu")
        self.action = action
        self.critic = torch.nn.Linear(4, 1)

    def actor(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.full((len(obs), 1), self.action)

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.full((len(obs), 1), self.action, np.float32)


def test_the_share_of_actions_at_a_bound_is_the_saturated_share():
    from rltrain.utils.diagnosis.rules._probe import saturated_share

    obs = np.random.default_rng(0).normal(size=(32, 3)).astype(np.float32)
    assert saturated_share(BoundView(2.0), obs) == 1.0
    assert saturated_share(BoundView(-1.99), torch.as_tensor(obs)) == 1.0
    assert saturated_share(BoundView(0.5), obs) == 0.0  # inside the range


def test_a_still_policy_saturated_at_its_bounds_is_not_stalled_nor_slow(tmp_path):
    """Its tanh is saturated: no actor_lr mends that (the causes are other rules'). A
    still policy inside the range is named."""
    from rltrain.utils.diagnosis.rules.actor_stalled import ActorPace, ActorStalled

    def found(action: float) -> dict[str, bool]:
        view = BoundView(action)  # it creeps by 1e-6 of the half-range a span
        context = RuleContext(tiny_config(tmp_path), 3, 1, view=view)
        rules = {"actor_stalled": ActorStalled(context), "actor_pace": ActorPace(context)}
        for rule in rules.values():
            for k in range(300):
                rule.probe.offer(k * 7, np.full(3, k / 300, np.float32))
        named = {name: False for name in rules}
        every = rules["actor_stalled"].settings.every_updates
        for k in range(1, 8):
            with torch.no_grad():
                view.critic.weight.mul_(1.01)  # a critic that learns: 1% a span
            view.action -= 2e-6
            for name, rule in rules.items():
                named[name] |= bool(rule.on_update(Update(k * every, k * every, {})))
        return named

    assert found(2.0) == {"actor_stalled": False, "actor_pace": False}
    assert found(0.5) == {"actor_stalled": True, "actor_pace": True}


def test_an_imbalance_from_a_saturated_actor_is_not_named(tmp_path):
    from rltrain.utils.diagnosis.rules.gradient_rules import ValuePolicyImbalance

    rule = ValuePolicyImbalance(RuleContext(tiny_config(tmp_path), 3, 1))
    assert rule.check(100, 1e6, lambda: 0.95) == []
    assert [f.rule for f in rule.check(100, 1e6, lambda: 0.2)] == ["value_policy_imbalance"]
    asked = []
    assert rule.check(100, 10.0, lambda: asked.append(1) or 0.0) == [] and not asked
    off = ValuePolicyImbalance(RuleContext(tiny_config(
        tmp_path, diagnostics={"value_policy_imbalance": {"action": "off"}}), 3, 1))
    assert off.check(100, 1e6, lambda: asked.append(1) or 0.0) == [] and not asked
