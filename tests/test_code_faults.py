"""Code faults of a plain loop named from the order of its backward passes and optimiser
steps (integrations/gradient_sources.py; utils/diagnosis/rules/code_faults.py) and a target network
that never moves (utils/diagnosis/rules/target_update.py): each planted in a hand-made loop and in
the fault benchmark's loop, while the healthy orders (SB3's and CleanRL's among them)
stay silent."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import SAC, TD3
from torch import nn

from benchmarks.faults.loop import run as run_loop
from rltrain.integrations.sb3 import RltrainCallback
from rltrain.integrations.views import StepGradients
from rltrain.utils.run.log_files import read_jsonl

CODE_RULES = {"gradients_not_zeroed", "actor_loss_steps_critic"}


def update(kind: str, actor: nn.Module, critic: nn.Module, actor_opt: torch.optim.Optimizer,
           critic_opt: torch.optim.Optimizer, g: torch.Generator) -> None:
    """One DDPG-style update in the order `kind` names."""
    obs, actions, target = (torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g),
                            torch.randn(8, 1, generator=g))

    def critic_loss() -> torch.Tensor:
        return (critic(torch.cat([obs, actions], 1)) - target).square().mean()

    if kind == "micro_batches":  # two backwards add up into one step, cleared after it
        critic_loss().backward()
        critic_loss().backward()
        critic_opt.step()
        critic_opt.zero_grad()
    else:
        if kind not in ("no_zero_grad", "no_zero_grad_sb3_order"):
            critic_opt.zero_grad(set_to_none=kind != "zeroed_in_place")
        critic_loss().backward()
        critic_opt.step()
    actor_loss = -critic(torch.cat([obs, actor(obs)], 1)).mean()
    actor_opt.zero_grad()
    if kind == "actor_steps_critic":
        critic_opt.zero_grad()
        actor_loss.backward()
        critic_opt.step()
    elif kind in ("actor_only", "no_zero_grad", "micro_batches"):
        actor_loss.backward(inputs=list(actor.parameters()))
    else:  # SB3's and CleanRL's: into the critic's .grad too, cleared before its next use
        actor_loss.backward()
    actor_opt.step()


@pytest.mark.parametrize("kind, stale, through_actor", [
    ("sb3_order", 0, 0), ("zeroed_in_place", 0, 0), ("actor_only", 0, 0),
    ("micro_batches", 0, 0), ("no_zero_grad", 5, 0), ("no_zero_grad_sb3_order", 5, 0),
    ("actor_steps_critic", 0, 6)])
def test_each_optimiser_step_is_counted_by_where_its_gradients_came_from(
        kind, stale, through_actor):
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    steps = StepGradients({"actor": actor, "critic": critic})
    g = torch.Generator().manual_seed(1)
    try:
        for _ in range(6):
            update(kind, actor, critic, actor_opt, critic_opt, g)
        counts = steps.sources.counts()
    finally:
        steps.close()
    # the first step has nothing before it to still hold
    assert counts.stale == {"actor": 0, "critic": stale}
    assert counts.through_actor == through_actor
    assert counts.steps == {"actor": 6, "critic": 12 if kind == "actor_steps_critic" else 6}


def warned(log_dir) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for event in read_jsonl(log_dir / "events.jsonl") if (log_dir / "events.jsonl").exists() \
            else []:
        if event.get("action") in ("warn", "pause"):
            found.setdefault(event["rule"], []).append(event)
    return found


# target_update measured every 5 updates (not 250): five spans in 25 updates
WATCH = {"diagnostics": {"target_update": {"every_updates": 5}}}


@pytest.mark.parametrize("fault, rule, words", [
    (None, None, None),
    ("no_zero_grad", "gradients_not_zeroed", "the critic's optimiser stepped "),
    ("actor_steps_critic", "actor_loss_steps_critic", "backward(inputs=list(actor.parameters"),
    ("frozen_target", "target_update", "the loop does not update its target networks"),
    ("done_includes_truncation", "time_limit_terminal", "ended the episode by its time "
                                                        "limit only")])
def test_the_benchmark_loop_names_its_planted_code_fault(tmp_path, fault, rule, words):
    log_dir = run_loop(fault, "Pendulum-v1", 300, 0, tmp_path, "loop", hidden=16,
                       learning_starts=200, eval_every=10_000, watch=WATCH)
    found = warned(log_dir)
    named = set(found) & (CODE_RULES | {"target_update", "time_limit_terminal"})
    assert named == ({rule} if rule else set())
    if rule:
        first = found[rule][0]
        assert words in first["message"] and "suggested_set" not in first
        assert first["env_steps"] <= 240  # within the first 40 updates


@pytest.mark.parametrize("algo", [TD3, SAC])
def test_sb3s_own_updates_are_counted_not_traced(tmp_path, monkeypatch, algo):
    """SB3's update is its own code: its optimiser steps are counted (update_ratio), its
    backward passes get no hooks (SB3's order is the hand-made `sb3_order` above)."""
    monkeypatch.chdir(tmp_path)
    model = algo("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [16, 16]},
                 batch_size=32, learning_starts=100, seed=0, device="cpu")
    callback = RltrainCallback("sb3", config=WATCH)
    hooked = []
    original = torch.Tensor.register_hook

    def register_hook(tensor, hook):
        hooked.append(tensor)
        return original(tensor, hook)

    monkeypatch.setattr(torch.Tensor, "register_hook", register_hook)
    model.learn(300, callback=callback)
    counts = callback.step_gradients.sources.counts()
    assert counts.steps["critic"] == 200 and not counts.traced
    params = {id(p) for p in model.policy.parameters()}
    assert not [t for t in hooked if id(t) in params]
    assert not set(warned(tmp_path / "logs" / "sb3")) & (CODE_RULES | {"target_update"})


@pytest.mark.parametrize("algo", [TD3, SAC])
def test_sb3s_own_order_of_updates_traced_is_no_code_fault(algo):
    """Why SB3's update need not be traced: traced, its order (the actor's loss through
    the critic after the critic's step, cleared before its next backward) counts no
    stale and no actor-stepped critic step."""
    model = algo("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [16, 16]},
                 batch_size=32, learning_starts=100, seed=0, device="cpu")
    steps = StepGradients({"actor": model.actor, "critic": model.critic})
    try:
        model.learn(300)
    finally:
        steps.close()
    counts = steps.sources.counts()
    assert counts.traced and counts.steps["critic"] == 200
    assert counts.stale == {"actor": 0, "critic": 0} and counts.through_actor == 0


def action_range_rule():
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.diagnosis.rules.action_range import ActionRangeUnused
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    return ActionRangeUnused(RuleContext(config_from_dict({"env_name": "Pendulum-v1"}), 3, 1))


@pytest.mark.parametrize("policy, fires", [
    ("tanh_unscaled", True),       # at +-1 on [-2, 2]: half the range, piled on both sides
    ("tanh_scaled", False),        # at the bounds +-2: action_saturation's, not this one
    ("constant", False),           # one value everywhere: a pile on one side only
    ("spread_small", False),       # within +-1 but nothing piled at the edge
    ("barely_acts", False),        # all within 0.01 of 0 (MountainCar SAC standing still)
])
def test_actions_piled_at_a_limit_inside_the_bounds_are_named(policy, fires):
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 3.0, (512, 1))
    actions = {"tanh_unscaled": np.tanh(x), "tanh_scaled": 2 * np.tanh(x),
               "constant": np.full((512, 1), 0.3),
               "spread_small": rng.uniform(-1.0, 1.0, (512, 1)),
               "barely_acts": 0.01 * np.tanh(x)}[policy]
    low, high = np.array([-2.0]), np.array([2.0])
    found = action_range_rule()._judge(3000, actions, low, high)
    assert bool(found) == fires
    if fires:
        assert found[0].value["reach"] == 0.5 and found[0].value["at_limit"] > 0.4
        assert "use only 50% of the env's range" in found[0].message
