"""The training set-up rules (utils/diagnosis/rules/): each fires on a tiny planted case, fed the
hook records directly, with a suggested_set that moves the right key the right way, and
stays silent on a healthy one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rltrain.scripts.training.agent_setup import agent_view, build_agent
from rltrain.utils.diagnosis.rules.actor_stalled import ActorStalled
from rltrain.utils.diagnosis.rules.learning_rate import LearningRate
from rltrain.utils.diagnosis.rules.long_horizon import LongHorizon
from rltrain.utils.diagnosis.rules.no_learning import NoLearning
from rltrain.utils.diagnosis.rules.q_divergence import QDivergence
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.diagnosis.rules.target_update import TargetUpdate
from rltrain.utils.hooks.eval_result import EvalResult
from rltrain.utils.hooks.hook import EpisodeEnd, Evaluation, Step, Update

from conftest import tiny_config

LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
EVERY = {"every_updates": 1, "measurements": 3}


def context(tmp_path: Path, **overrides: Any) -> RuleContext:
    config = tiny_config(tmp_path, **overrides)
    agent, _ = build_agent(config, 3, LOW, HIGH, torch.device("cpu"))
    return RuleContext(config, 3, 1, agent_view(agent, LOW, HIGH))


def nudge(module: torch.nn.Module, share: float, seed: int = 0) -> None:
    """Move every parameter by about `share` of its norm, in a random direction."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.add_(noise * share * p.norm() / noise.norm())


def updates(hook: Any, n: int, share: float, nets: tuple[str, ...] = ("actor", "critic"),
            q: float = -100.0, after: Any = None) -> list:
    view, found = hook.context.view, []
    for k in range(1, n + 1):
        for net in nets:
            nudge(getattr(view, net), share, seed=k)
        if after is not None:
            after(view)
        metrics = {"critic_loss": 1.0, "q_mean": q, "actor_loss": 1.0}
        found += hook.on_update(Update(k * 10, k, metrics))
    return found


def test_weights_that_never_move_at_a_tiny_rate_are_named_too_low(tmp_path: Path) -> None:
    """An actor_lr of 3e-8 (SB3's learning_rate so set) moves no float32 weight: too low,
    not "dead after too large steps"."""
    ctx = context(tmp_path, actor_lr=3e-8, diagnostics={"learning_rate": EVERY})
    found = updates(LearningRate(ctx), 8, share=1e-3, nets=("critic",))
    assert found and "actor_lr 3e-08 is too low" in found[-1].message
    assert "steps too small to change a float32 weight" in found[-1].message
    assert "too large steps" not in found[-1].message


def test_learning_rate_too_high_names_both_networks_two_orders_above(tmp_path: Path) -> None:
    ctx = context(tmp_path, actor_lr=0.1, critic_lr=0.1, diagnostics={"learning_rate": EVERY})
    found = updates(LearningRate(ctx), 8, share=0.2)
    assert found, "a 20% weight change per update must fire"
    finding = found[-1]
    assert finding.rule == "learning_rate"
    assert finding.suggested_set == {"actor_lr": 1e-3, "critic_lr": 1e-3}
    assert finding.message.count("2.0 orders of magnitude above") == 2


def test_a_learning_rate_as_far_off_as_the_judged_one_moves_with_it(tmp_path: Path) -> None:
    """Only the actor's update is measured as too large (its critic barely moves); the
    critic's learning rate, set to 0.1 with it, is lowered with it too (a fix of half
    the mistake is no fix), and said so. A usual one is left alone."""
    def critic_step(view):  # a usual step for the critic: no verdict of its own
        nudge(view.critic, 3e-4)

    ctx = context(tmp_path, actor_lr=0.1, critic_lr=0.1, diagnostics={"learning_rate": EVERY})
    found = updates(LearningRate(ctx), 8, share=0.2, nets=("actor",), after=critic_step)
    assert found[-1].value == {"actor": 0.2}
    assert found[-1].suggested_set == {"actor_lr": 1e-3, "critic_lr": 1e-3}
    assert "critic_lr 0.1 is as far outside the usual range: moved with it" in \
        found[-1].message
    ctx = context(tmp_path, actor_lr=0.1, critic_lr=1e-3, diagnostics={"learning_rate": EVERY})
    found = updates(LearningRate(ctx), 8, share=0.2, nets=("actor",), after=critic_step)
    assert found[-1].suggested_set == {"actor_lr": 1e-3}


def test_learning_rate_too_low_proposes_the_usual_range(tmp_path: Path) -> None:
    ctx = context(tmp_path, actor_lr=1e-6, critic_lr=1e-6, diagnostics={"learning_rate": EVERY})
    found = updates(LearningRate(ctx), 8, share=1e-6)
    assert found and found[-1].suggested_set == {"actor_lr": 1e-4, "critic_lr": 1e-4}
    assert "too low" in found[-1].message


def test_a_rate_far_outside_the_usual_range_is_judged_on_fewer_measurements(tmp_path):
    """The setting is evidence too: 0.1 is judged on `far_measurements`, a usual rate
    whose steps the weights' scale makes too large on `measurements`."""
    settings = {"every_updates": 1, "measurements": 5, "far_measurements": 2}

    def first_finding(lr: float) -> int:
        ctx = context(tmp_path, actor_lr=lr, critic_lr=lr,
                      diagnostics={"learning_rate": settings})
        hook, view = LearningRate(ctx), ctx.view
        for k in range(1, 20):
            nudge(view.actor, 0.2, seed=k)
            nudge(view.critic, 0.2, seed=k)
            metrics = {"critic_loss": 1.0, "actor_loss": 1.0}
            if hook.on_update(Update(k * 10, k, metrics)):
                return k
        return 0

    assert first_finding(0.1) == 3  # 2 measurements after the first snapshot
    assert first_finding(1e-3) == 6  # 5


def test_learning_rate_silent_on_a_usual_step(tmp_path: Path) -> None:
    ctx = context(tmp_path, diagnostics={"learning_rate": EVERY})
    assert updates(LearningRate(ctx), 8, share=1e-3) == []


def _lerp(tau: float) -> Any:
    def soft_update(view: Any) -> None:
        target = view.networks()["critic_target"]
        with torch.no_grad():
            for p, t in zip(view.critic.parameters(), target.parameters(), strict=True):
                t.lerp_(p, tau)
    return soft_update


def _drifting_critic(ctx: Any, hook: Any, update_target: Any) -> list:
    """60 updates of a steady critic drift (the same direction every update, 1% of the
    norm each), `update_target(view)` after each; the hook's findings."""
    view = ctx.view
    drift = [torch.randn_like(p) for p in view.critic.parameters()]
    found = []
    for k in range(1, 61):
        with torch.no_grad():
            for p, d in zip(view.critic.parameters(), drift, strict=True):
                p.add_(d * 0.01 * p.norm() / d.norm())
        update_target(view)
        found += hook.on_update(Update(k, k, {"q_mean": -1.0, "actor_loss": 1.0}))
    return found


@pytest.mark.parametrize("tau, fires", [(1.0, "chases"), (0.0, "frozen"), (0.02, None)])
def test_target_update_names_a_chasing_or_frozen_target(tmp_path: Path, tau: float,
                                                        fires: str | None) -> None:
    ctx = context(tmp_path, tau=max(tau, 1e-6),
                  diagnostics={"target_update": {**EVERY, "frozen": 0.5}})
    found = _drifting_critic(ctx, TargetUpdate(ctx), _lerp(tau))
    if fires is None:
        assert found == []
        return
    assert found and fires in found[-1].message
    assert found[-1].suggested_set == {"tau": 0.005}


@pytest.mark.parametrize("tau, code", [(0.005, True), (1e-6, False)])
def test_a_target_that_never_changes_is_code_unless_tau_explains_it(
        tmp_path: Path, tau: float, code: bool) -> None:
    """The loop never touches the target while the critic drifts: with a usual tau that
    is the loop's code, no config fix; with a tau far too small, tau's frozen verdict."""
    ctx = context(tmp_path, tau=tau, diagnostics={"target_update": {**EVERY, "frozen": 0.5}})
    found = _drifting_critic(ctx, TargetUpdate(ctx), lambda view: None)
    assert found
    if code:
        assert "the loop does not update its target networks" in found[0].message
        assert found[0].suggested_set == {} and found[0].value["target_moved"] == 0.0
    else:
        assert all("frozen" in f.message for f in found)
        assert found[-1].suggested_set == {"tau": 0.005}


def _episodes(hook: Any, n: int, length: int, episode_return: float) -> None:
    for i in range(n):
        hook.on_episode_end(EpisodeEnd((i + 1) * length, 0, i, episode_return, length,
                                       False, 0))


def test_long_horizon_fires_when_q_outgrows_the_returns(tmp_path: Path) -> None:
    ctx = context(tmp_path, gamma=0.9999, diagnostics={"long_horizon": {"every_updates": 1}})
    hook = LongHorizon(ctx)
    _episodes(hook, 5, 200, -1000.0)
    found = hook.on_update(Update(2000, 1, {"q_mean": -5000.0}))
    assert found and found[0].suggested_set == {"gamma": 0.99}
    assert found[0].suggested_set["gamma"] < 0.9999


def test_long_horizon_silent_with_the_usual_gamma(tmp_path: Path) -> None:
    hook = LongHorizon(context(tmp_path, diagnostics={"long_horizon": {"every_updates": 1}}))
    _episodes(hook, 5, 200, -1000.0)
    assert hook.on_update(Update(2000, 1, {"q_mean": -5000.0})) == []


def _steps(hook: Any, n: int, reward: float = -1.0) -> None:
    rng = np.random.default_rng(0)
    for i in range(1, n + 1):
        obs = rng.normal(size=3).astype(np.float32)
        hook.on_step(Step(i, 0, obs, np.zeros(1), reward * (i % 17) / 16, obs, False,
                          False, True))


@pytest.mark.parametrize("actor_moves", [False, True])
def test_actor_stalled_fires_when_only_the_critic_moves(tmp_path: Path,
                                                        actor_moves: bool) -> None:
    ctx = context(tmp_path, actor_lr=1e-8,
                  diagnostics={"actor_stalled": {**EVERY, "measurements": 2}})
    hook = ActorStalled(ctx)
    _steps(hook, 2000)
    nets = ("actor", "critic") if actor_moves else ("critic",)
    found = updates(hook, 6, share=1e-2, nets=nets)
    if actor_moves:
        assert found == []
    else:
        assert found and found[-1].suggested_set == {"actor_lr": 1e-4}


def _result(mean: float) -> EvalResult:
    return EvalResult([mean], [999], [mean], np.zeros((1, 3)), np.zeros((1, 3)), [True])


def _constant_actor(view: Any) -> None:
    with torch.no_grad():
        for p in view.actor.parameters():
            p.zero_()


FLAT = [-0.4, -0.4, -0.41, -0.4, -0.4]


@pytest.mark.parametrize("means, constant, moves, fires", [
    (FLAT, True, True, True),                                  # stands still: one action
    ([-40.0, -45.0, -38.0, -50.0, -42.0], True, True, True),   # no better than random
    ([-30.0, -10.0, 20.0, 60.0, 90.0], True, True, False),     # learning
    (FLAT, False, True, False),                                # flat, but varied actions
    (FLAT, "small", False, False),                             # a dead actor: not exploration
])
def test_no_learning_names_exploration(tmp_path: Path, means: list[float], constant: Any,
                                       moves: bool, fires: bool) -> None:
    ctx = context(tmp_path, learning_starts=2000, max_timesteps=10_000)
    if constant is True:
        _constant_actor(ctx.view)
    elif constant == "small":  # nearly constant actions from weights that never change
        with torch.no_grad():
            for p in ctx.view.actor.parameters():
                p.mul_(1e-3)
    else:
        nudge(ctx.view.actor, 30.0)
    hook = NoLearning(ctx)
    _steps(hook, 2000)
    for i, ret in enumerate((-35.0, -30.0, -41.0)):
        hook.on_episode_end(EpisodeEnd((i + 1) * 600, 0, i, ret, 600, False, 0))
    found = []
    for i, mean in enumerate(means):
        if moves:
            nudge(ctx.view.actor, 1e-4, seed=i)
        found += hook.on_eval(Evaluation(3000 + i * 1000, _result(mean), max(means), 0))
    assert bool(found) is fires
    if fires:
        assert found[0].suggested_set == {"exploration_noise": 0.5, "noise_type": "ou"}


def test_no_learning_judges_tiny_returns_against_the_runs_episodes(tmp_path: Path) -> None:
    """MountainCarContinuous with too little noise: the car stands still in the valley,
    every evaluation earns about -0.001 and no episode ended in the warm-up (100 steps):
    flat against what the run's own episodes earned (-4.9 .. -0.9), not against the
    evaluations' own tiny magnitude."""
    ctx = context(tmp_path, learning_starts=100, max_timesteps=10_000)
    _constant_actor(ctx.view)
    hook = NoLearning(ctx)
    _steps(hook, 2000)
    for i, ret in enumerate((-4.9, -1.0, -1.1, -0.9, -1.0)):
        hook.on_episode_end(EpisodeEnd((i + 1) * 999, 0, i, ret, 999, False, 0))
    found = []
    for i, mean in enumerate((-0.0003, -0.0021, -0.0005, -0.0011, -0.0015)):
        nudge(ctx.view.actor, 1e-4, seed=i)
        found += hook.on_eval(Evaluation(2000 * (i + 1), _result(mean), -0.0003, 0))
    assert [f.env_steps for f in found] == [10_000]
    assert found[0].suggested_set == {"exploration_noise": 0.5, "noise_type": "ou"}
    again = NoLearning(ctx)
    again.load_state_dict(hook.state_dict())
    assert again.largest_return == 4.9


@pytest.mark.parametrize("qs, fires", [([100, 150, 220, 300, 420], True),
                                       ([-300, -310, -320, -330, -340], False)])
def test_q_divergence_against_the_reachable_returns(tmp_path: Path, qs: list[float],
                                                    fires: bool) -> None:
    hook = QDivergence(context(tmp_path, critic_lr=3e-3,
                               diagnostics={"q_divergence": {"every_updates": 1}}))
    _steps(hook, 500, reward=-16.0)  # rewards -16..0: Q in -1600..0
    found = []
    for k, q in enumerate(qs, start=1):
        found += hook.on_update(Update(k, k, {"q_mean": float(q)}))
    assert bool(found) is fires
    if fires:
        assert found[0].suggested_set == {"critic_lr": 3e-4}


def test_rule_state_round_trips(tmp_path: Path) -> None:
    ctx = context(tmp_path, diagnostics={"learning_rate": EVERY})
    hook = LearningRate(ctx)
    updates(hook, 4, share=1e-3)
    again = LearningRate(ctx)
    again.load_state_dict(hook.state_dict())
    assert again.state_dict() == hook.state_dict()


def _dqn_target_findings(tmp_path: Path, interval: int | None, drift: float = 0.01,
                         tau: float = 1.0) -> list:
    """60 updates of a DQN whose Q network drifts `drift` of its norm per update (two
    env steps each), its target copied every `interval` env steps (the library's
    recorded setting; None: not recorded, and never copied)."""
    from types import SimpleNamespace

    library: dict[str, Any] = {"algorithm": "DQN", "tau": tau}
    if interval is not None:
        library["target_update_interval"] = interval
    copy_every = interval or 10**9
    torch.manual_seed(0)
    config = tiny_config(tmp_path, algo="dqn", learning_starts=0, library=library,
                         diagnostics={"target_update": {**EVERY, "frozen": 0.5}})
    q_net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    target = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    target.load_state_dict(q_net.state_dict())
    view = SimpleNamespace(critic=q_net, networks=lambda: {"q_net": q_net,
                                                            "q_net_target": target})
    hook = TargetUpdate(RuleContext(config, 3, 1, view))
    directions = [torch.randn_like(p) for p in q_net.parameters()]
    found = []
    for k in range(1, 61):
        with torch.no_grad():
            for p, d in zip(q_net.parameters(), directions, strict=True):
                p.add_(d * drift * p.norm() / d.norm())
        if (2 * k) % copy_every == 0:
            with torch.no_grad():
                for t, p in zip(target.parameters(), q_net.parameters(), strict=True):
                    t.lerp_(p, tau)
        found += hook.on_update(Update(2 * k, k, {"critic_loss": 1.0}))
    return found


@pytest.mark.parametrize("interval, fires", [(10, False), (10_000, True)])
def test_a_dqn_target_copied_too_rarely_is_frozen_and_names_the_interval(
        tmp_path: Path, interval: int, fires: bool) -> None:
    """DQN copies its Q network into the target every `interval` env steps (two per
    update here): every 5 updates (RL Zoo's CartPole) it stays close, not a chase; never
    within the run (SB3's Atari-scale 10,000) it drifts past `frozen` of the norm, which
    names target_update_interval for a copy about every 200 updates, not a loop that
    never updates its target."""
    found = _dqn_target_findings(tmp_path, interval)
    if not fires:
        assert found == []
        return
    assert found and all("copied every 10000 env steps" in f.message for f in found)
    assert found[-1].suggested_set == {"target_update_interval": 400}


def test_a_dqn_loop_that_records_no_interval_is_judged_frozen_not_a_code_fault(
        tmp_path: Path) -> None:
    """A DQN loop of your own records no target_update_interval: a target not copied
    over the spans may be a rare copy, so it is judged frozen (no key to propose)."""
    found = _dqn_target_findings(tmp_path, None)
    assert found and all("copied rarely" in f.message for f in found)
    assert found[-1].suggested_set == {}


def test_a_dqn_target_copied_as_often_as_proposed_is_left_to_the_rate(tmp_path: Path) -> None:
    """A Q network that moves 5% of its norm per update leaves a target copied every 60
    env steps (30 updates, under the proposed 200) half its norm behind: not the
    interval's fault."""
    assert _dqn_target_findings(tmp_path, 60, drift=0.05) == []


def test_a_dqn_target_averaged_with_a_tiny_tau_names_tau(tmp_path: Path) -> None:
    """Updated every 10 env steps (5 updates) but only 1% of the way each time (SB3's and
    RLlib's DQN `tau`): as frozen as a rare copy, and tau is the key to change."""
    found = _dqn_target_findings(tmp_path, 10, drift=0.02, tau=0.01)
    assert found and "tau 0.01" in found[-1].message
    assert found[-1].suggested_set == {"tau": 1.0}
