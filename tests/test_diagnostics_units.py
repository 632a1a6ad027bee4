"""Flow-1 statistics and verdicts on synthetic data, where the right answer is known."""

from __future__ import annotations

import functools
import math
import types

import numpy as np
import pytest

from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.diagnosis.measure.gradients import DropDetector, GradientVerdicts, pre_clip
from rltrain.utils.diagnosis.measure.reward_signal import RewardAnalyzer, reward_stats
from rltrain.utils.diagnosis.measure.state_action import StateActionMap

from conftest import DEVICE

SETTINGS = config_from_dict({}).diagnostics


def returns(n: int = 10) -> np.ndarray:
    return np.zeros(n)


def test_rare_large_penalties_dominate_the_penalty_share_but_not_the_z3_ratio():
    rng = np.random.default_rng(0)
    rewards = -1.0 + 0.1 * rng.standard_normal(100_000)
    rewards[rng.random(100_000) < 0.005] -= 1000.0  # a x1000 collision penalty
    stats = reward_stats(rewards, returns())
    assert stats["penalty_share"] > 0.9 and stats["bonus_share"] < 0.01
    assert stats["spike_ratio"] < 0.1  # the textbook |z| > 3 share cannot see it
    assert stats["kurtosis"] > 100


def test_light_tailed_and_bonus_signals():
    rng = np.random.default_rng(1)
    normal = reward_stats(rng.normal(-5.0, 2.0, 50_000), returns())
    assert normal["penalty_share"] == 0.0 and normal["bonus_share"] == 0.0
    sparse = np.full(50_000, -0.01)
    sparse[::500] = 100.0  # a goal bonus once per 500-step episode
    stats = reward_stats(sparse, returns())
    assert stats["bonus_share"] > 0.9 and stats["penalty_share"] == 0.0


def test_cv_uses_the_magnitude_of_a_negative_mean():
    stats = reward_stats(np.array([-10.0, -12.0, -8.0, -10.0]), returns(2))
    assert stats["cv"] == pytest.approx(np.std([-10, -12, -8, -10]) / 10.0)


def test_analyzer_keeps_a_bounded_window_and_the_largest_reward():
    analyzer = RewardAnalyzer(window=3)
    for episode in range(6):
        for step in range(4):
            analyzer.add(-float(episode) if step else 7.0 * (episode == 1))
        analyzer.end_episode()
    assert len(analyzer.episodes) == 3 and analyzer.max_abs == 7.0
    assert analyzer.stats()["max_abs"] == 7.0


def test_the_window_statistics_read_each_episodes_return_and_length_kept_with_it():
    """The returns and lengths kept beside the window are its episodes' own, after the
    window slides and after a round trip through a checkpoint's state."""
    rng = np.random.default_rng(3)
    analyzer = RewardAnalyzer(window=8)
    for _ in range(13):
        for reward in rng.normal(size=int(rng.integers(1, 40))):
            analyzer.add(float(reward))
        analyzer.end_episode(terminated=bool(rng.integers(2)))
    stats = analyzer.stats()
    rewards = np.concatenate(analyzer.episodes)
    returns = np.array([e.sum() for e in analyzer.episodes], dtype=np.float64)
    assert stats["trend"] == reward_stats(rewards, returns)["trend"]
    assert list(analyzer.lengths) == [e.size for e in analyzer.episodes]
    restored = RewardAnalyzer(window=8)
    restored.load_state_dict(analyzer.state_dict())
    assert restored.stats() == stats


def test_the_statistics_are_due_once_a_tenth_of_the_window_is_new():
    """Every episode from the fifth while the window holds under 20; then once
    len(window) // 10 episodes are new, the count kept across a checkpoint."""
    analyzer = RewardAnalyzer(window=100)
    due = []
    for episode in range(1, 61):
        for step in range(3):
            analyzer.add(float(step + episode))
        analyzer.end_episode()
        if analyzer.due_stats() is not None:
            due.append(episode)
        if episode == 45:  # resumed from a checkpoint here
            state = analyzer.state_dict()
            analyzer = RewardAnalyzer(window=100)
            analyzer.load_state_dict(state)
    assert due[:15] == list(range(5, 20))
    assert due[15:] == [21, 23, 25, 27, 29, 32, 35, 38, 42, 46, 51, 56]


def crash_episodes(analyzer: RewardAnalyzer, terminated: bool, at: int = -1) -> None:
    """20 episodes of 50 small rewards, one of them -100 (a crash) at step `at`."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        rewards = list(rng.normal(-1.0, 0.3, size=50))
        rewards[at] = -100.0
        for reward in rewards:
            analyzer.add(float(reward))
        analyzer.end_episode(terminated=terminated)


def test_a_penalty_that_ends_the_episode_is_not_a_spike():
    crashed, cut_off, inside = (RewardAnalyzer(window=20) for _ in range(3))
    crash_episodes(crashed, terminated=True)  # LunarLander's crash
    crash_episodes(cut_off, terminated=False)  # the same step, a time limit ended it
    crash_episodes(inside, terminated=True, at=25)  # a penalty mid-episode
    assert crashed.stats()["penalty_share"] == 0.0
    assert cut_off.stats()["penalty_share"] > 0.9 and inside.stats()["penalty_share"] > 0.9
    assert crashed.stats()["mean"] == cut_off.stats()["mean"]  # the rest sees every step
    restored = RewardAnalyzer(window=20)
    restored.load_state_dict(crashed.state_dict())
    assert restored.stats() == crashed.stats()
    old = crashed.state_dict()
    del old["terminated"]  # a checkpoint written before endings were kept
    restored.load_state_dict(old)
    assert restored.stats()["penalty_share"] == cut_off.stats()["penalty_share"]


def make_map(n_clusters: int = 2, bins: int = 10) -> StateActionMap:
    settings = types.SimpleNamespace(**{**vars(SETTINGS), "n_clusters": n_clusters,
                                        "action_bins": bins, "max_samples": 2000})
    return StateActionMap(2, np.array([-1.0]), np.array([1.0]), settings, 0.9, seed=0)


def fill(sa: StateActionMap, centre: float, actions: np.ndarray, reward: float) -> None:
    """One episode per sample: the state's return-to-go is its reward."""
    rng = np.random.default_rng(abs(int(centre * 10)))
    for a in actions:
        row = sa.ptr
        sa.states[row] = centre + 0.01 * rng.standard_normal(2)
        sa.actions[row] = a
        sa._episode_rows[0].append((row, 0))
        sa.ptr, sa.size, sa.recent = sa.ptr + 1, sa.size + 1, sa.recent + 1
        sa.end_episode(np.array([reward]))


def test_the_actor_hook_keeps_acting_calls_only():
    import torch

    sa = make_map()  # sampling rate 1 at step 0
    actor = torch.nn.Linear(2, 1)
    actor.register_forward_hook(sa.hook)
    actor(torch.zeros(1, 2))  # an update's forward with batch_size 1: autograd on
    actor(torch.zeros(4, 2))
    assert sa.size == 0
    with torch.inference_mode():
        actor(torch.ones(1, 2))  # agent.act
    assert sa.size == 1 and sa.states[0].tolist() == [1.0, 1.0]


def test_the_actor_hook_reads_all_envs_rows_back_in_one_transfer_each():
    """On CUDA each read back waits for the device: one for the observations and one for
    the actions of every env, not two per env."""
    import torch
    from test_agent import HostReads

    settings = types.SimpleNamespace(**{**vars(SETTINGS), "max_samples": 100})
    sa = StateActionMap(2, np.array([-1.0]), np.array([1.0]), settings, 0.9, seed=0,
                        num_envs=3)  # sampling rate 1 at step 0: every env's row is kept
    actor = torch.nn.Linear(2, 1)
    actor.register_forward_hook(sa.hook)
    obs = torch.arange(6.0).reshape(3, 2)
    with torch.inference_mode(), HostReads() as reads:
        actor(obs)
    assert sorted(reads.calls) == ["cpu", "cpu", "numpy", "numpy"]
    assert sa.size == 3 and sa.states[:3].tolist() == obs.tolist()


def test_cluster_verdicts_follow_the_action_distribution():
    sa = make_map()
    fill(sa, -5.0, np.full(150, 0.93), reward=-1.0)  # one action everywhere: fixated
    fill(sa, 5.0, np.linspace(-0.999, 0.999, 150), reward=-1.0)  # uniform: chaotic
    view = sa.analyse(100)
    fixated = view.verdicts["fixated_cluster"]
    chaotic = view.verdicts["chaotic_cluster"]
    assert len(fixated) == 1 and len(chaotic) == 1 and fixated[0][0] != chaotic[0][0]
    c = fixated[0][0]
    assert view.probs[c, 0, 9] == 1.0  # 0.93 falls in the last of 10 bins over [-1, 1]
    assert len(view.typical[c]) == 10 and view.dropped == []


def test_a_fixated_cluster_whose_return_drops_is_reported_as_dropped():
    sa = make_map()
    fill(sa, -5.0, np.full(150, 0.93), reward=-1.0)
    fill(sa, 5.0, np.linspace(-0.999, 0.999, 150), reward=-1.0)
    first = sa.analyse(100)
    fixated = first.verdicts["fixated_cluster"][0][0]
    sa.size = sa.ptr = 0
    fill(sa, -5.0, np.full(150, 0.93), reward=-10.0)  # the same states now do far worse
    fill(sa, 5.0, np.linspace(-0.999, 0.999, 150), reward=-1.0)
    assert sa.analyse(200).dropped == [fixated]



def test_a_return_to_go_near_zero_must_fall_by_a_share_of_the_clusters_spread():
    sa = make_map()
    sa._previous_outcome = np.array([0.5, -50.0])
    assert sa._dropped(np.array([0.2, -50.0])) == []  # 60% of 0.5, 0.6% of the spread
    sa._previous_outcome = np.array([0.5, -50.0])
    assert sa._dropped(np.array([-20.0, -50.0])) == [0]  # 41% of the spread
    sa._previous_outcome = np.array([-100.0, -100.0])
    assert sa._dropped(np.array([-100.0, -140.0])) == [1]  # no spread: its own magnitude


def test_cluster_ids_persist_between_heatmaps_and_through_a_checkpoint():
    """After the first fit each centre is the running mean of the states it was given
    (also after a resume), so a cluster keeps its id and region when the states move."""
    sa = make_map(n_clusters=3)
    for centre in (-5.0, 0.0, 5.0):
        fill(sa, centre, np.full(100, 0.5), reward=-1.0)
    first = sa.analyse(100)
    ids = {centre: int(np.argmin(np.abs(sa._centers[:, 0] - centre)))
           for centre in (-5.0, 0.0, 5.0)}
    assert sorted(ids.values()) == [0, 1, 2] and first.counts.tolist() == [100, 100, 100]
    restored = make_map(n_clusters=3)
    restored.load_state_dict(sa.state_dict())
    np.testing.assert_array_equal(restored._centers, sa._centers)
    for m in (sa, restored):
        m.size = m.ptr = 0
        for centre in (5.0, 0.0, -5.0):  # rows in another order: ids must not follow them
            fill(m, centre + 0.3, np.full(100, 0.5), reward=-1.0)
        m.analyse(200)
        for centre, c in ids.items():  # the mean of 100 states at c and 100 at c + 0.3
            assert abs(m._centers[c, 0] - (centre + 0.15)) < 0.01
    np.testing.assert_array_equal(sa._centers, restored._centers)

def test_saturation_counts_actions_within_one_percent_of_the_bounds():
    sa = make_map()
    fill(sa, 0.0, np.array([0.2, 0.3]), reward=0.0)
    assert sa.saturation() == 0.0
    fill(sa, 0.0, np.array([0.995, -0.999, 0.5, 0.0]), reward=0.0)
    assert sa.saturation() == 0.5  # only what came since the previous call
    assert sa.saturation() is None


def test_gradient_verdicts():
    verdicts = GradientVerdicts(SETTINGS)
    for _ in range(6):
        verdicts.review("actor", {"a.weight": 1.0, "b.bias": 0.5})
    found = verdicts.review("actor", {"a.weight": 1000.0, "b.bias": 0.5, "c.weight": None})
    assert found == {"a.weight": "exploding", "b.bias": "ok", "c.weight": "broken"}
    vanishing = {"x.weight": 1.0, "y.weight": 1e-6, "z.bias": 1e-9}
    found = verdicts.review("critic", vanishing)
    assert found == {"x.weight": "ok", "y.weight": "ok", "z.bias": "ok"}  # one read: passing
    found = verdicts.review("critic", vanishing)
    assert found == {"x.weight": "ok", "y.weight": "vanishing", "z.bias": "ok"}
    found = verdicts.review("critic", {"x.weight": 1.0, "y.weight": 0.1})
    assert found["y.weight"] == "ok" and "critic.y.weight" not in verdicts.below
    assert verdicts.review("critic", vanishing)["y.weight"] == "ok"  # the streak starts over


def test_a_layer_is_vanishing_against_the_hidden_layers_not_the_output():
    """A value head fit to unnormalised returns (RL Zoo's LunarLander PPO: a gradient
    norm of 15-24 at the head, 1e-3 at the body) is not a gradient that fails to reach
    the body: the layers compare with the strongest but the output layers, found by
    their shape (the fewest rows: twin critics' heads, a head registered first)."""
    import torch

    from rltrain.utils.diagnosis.measure.gradients import output_weights, strongest_weight

    net = torch.nn.ModuleDict({"head": torch.nn.Linear(64, 1),  # registered first
                               "body": torch.nn.Sequential(torch.nn.Linear(8, 64),
                                                           torch.nn.Linear(64, 64)),
                               "norm": torch.nn.LayerNorm(64),
                               "head2": torch.nn.Linear(64, 1)})
    outputs = output_weights(net)
    assert outputs == {"head.weight", "head2.weight"}
    value = {"head.weight": 15.4, "head.bias": 1.9, "body.0.weight": 0.0015,
             "body.0.bias": 0.001, "body.1.weight": 0.0007, "norm.weight": 0.0009,
             "head2.weight": 22.0}
    assert strongest_weight(value, outputs) == 0.0015
    verdicts = GradientVerdicts(SETTINGS)
    verdicts.review("critic", value, outputs=outputs)
    assert set(verdicts.review("critic", value, outputs=outputs).values()) == {"ok"}
    dead = {"body.0.weight": 1e-7, "body.1.weight": 0.01, "head.weight": 15.4}
    verdicts.review("critic", dead, outputs=outputs)
    assert verdicts.review("critic", dead, outputs=outputs)["body.0.weight"] == "vanishing"
    assert output_weights(torch.nn.Linear(3, 3)) == frozenset()  # nothing else: all judged
    assert strongest_weight({"a.weight": 1.0, "b.weight": 3.0}, frozenset({"b.weight"})) == 1.0


def test_a_new_reward_scale_below_the_absolute_floor_is_not_an_explosion():
    verdicts = GradientVerdicts(SETTINGS)  # MountainCar: ~0 gradients until the goal is found
    for _ in range(10):
        verdicts.review("critic", {"l.weight": 0.001})
    assert verdicts.review("critic", {"l.weight": 2.0}) == {"l.weight": "ok"}  # 2000x, < 5
    assert verdicts.review("critic", {"l.weight": 6.0}) == {"l.weight": "exploding"}


def test_gradients_that_grow_with_the_reward_scale_are_not_exploding():
    """MountainCar: action costs of 0.1 until the +100 goal is found, then gradients
    1000x larger; growth the reward scale does not explain is still an explosion."""
    verdicts = GradientVerdicts(SETTINGS)
    for _ in range(10):
        verdicts.review("critic", {"l.weight": 0.01}, reward_scale=0.1)
    assert verdicts.review("critic", {"l.weight": 10.0}, reward_scale=100.0) == {
        "l.weight": "ok"}
    assert verdicts.review("critic", {"l.weight": 10.0}, reward_scale=0.1) == {
        "l.weight": "exploding"}


def test_the_reward_scale_follows_every_reward_at_once():
    analyzer = RewardAnalyzer(window=10)
    analyzer.add(-0.1)
    analyzer.add(100.0)  # before the episode ends: updates learn from it at once
    analyzer.add(float("nan"))
    assert analyzer.max_abs == 100.0


def agent_and_start_q():
    """A fresh DDPG agent's view, one start state (zeros) and its critic's Q there, and
    an evaluation of one 10-step episode from it that ended by termination."""
    import torch

    from rltrain.scripts.training.agent_setup import agent_view, build_agent
    from rltrain.utils.hooks.eval_result import EvalResult

    low, high = np.array([-1.0], np.float32), np.array([1.0], np.float32)
    trained, _ = build_agent(config_from_dict({}), 2, low, high, DEVICE)
    start = np.zeros((1, 2), np.float32)
    with torch.no_grad():
        x = torch.as_tensor(start, device=DEVICE)
        q = float(trained.critic.q1(x, trained.actor(x)))

    def result(discounted: float) -> EvalResult:
        return EvalResult([discounted], [10], [discounted], start, start, [False])

    return agent_view(trained, low, high), q, result


def test_q_overestimation_is_relative_to_the_return_with_the_reward_scale_as_floor():
    from rltrain.utils.diagnosis.measure.critic import q_overestimation

    agent, q, result = agent_and_start_q()

    far = q_overestimation(agent, result(q - 200.0), 0.99, reward_scale=1.0)
    assert far["q_overestimation"] == pytest.approx(200.0 / abs(q - 200.0), rel=1e-5)
    near_zero = q_overestimation(agent, result(q - 1.0), 0.99, reward_scale=100.0)
    assert near_zero["q_overestimation"] == pytest.approx(1.0 / 100.0, rel=1e-5)


def test_a_soft_critics_entropy_bonus_counts_as_obtained():
    from rltrain.utils.diagnosis.measure.critic import q_overestimation

    agent, q, result = agent_and_start_q()
    obtained = result(q - 60.0)
    plain = q_overestimation(agent, obtained, 0.99, reward_scale=1.0)
    held = q_overestimation(agent, obtained, 0.99, reward_scale=1.0, bonus=5.0)
    steps = (1 - 0.99 ** 10) / 0.01  # the bonus of the episode's 10 steps
    assert plain["q_overestimation"] == pytest.approx(60.0 / abs(q - 60.0), rel=1e-5)
    assert held["q_entropy_bonus"] == pytest.approx(5.0 * steps)
    assert held["q_overestimation"] == pytest.approx((60.0 - 5.0 * steps) / abs(q - 60.0),
                                                     rel=1e-5)


def test_the_entropy_bonus_held_follows_the_temperature_at_the_targets_pace():
    from rltrain.utils.diagnosis.measure.critic import EntropyBonus

    def reading(ent_coef: float, entropy: float = 3.0) -> dict[str, float]:
        return {"ent_coef": ent_coef, "entropy": entropy}

    bonus = EntropyBonus(gamma=0.99, tau=0.005, every_updates=100)
    bonus.update(20_000, reading(1.0))  # 20,000 updates at 3 a step: 100 target moves
    assert bonus.held == pytest.approx(3.0 * (1 - 0.99 ** 100))
    bonus.update(20_050, reading(0.0))  # not a reading: ignored
    built = bonus.held
    bonus.update(40_000, reading(0.01, -6.0))  # a negative bonus counts as none
    assert bonus.held == pytest.approx(built * 0.99 ** 100)
    no_targets = EntropyBonus(gamma=0.99, tau=1.0, every_updates=100)
    no_targets.update(100, reading(1.0))
    assert no_targets.held == pytest.approx(3.0 * (1 - 0.99 ** 100))
    deterministic = EntropyBonus(gamma=0.99, tau=0.005)
    deterministic.update(100, {"critic_loss": 1.0})  # no temperature: no bonus
    assert deterministic.held == 0.0
    restored = EntropyBonus(gamma=0.99, tau=0.005)
    restored.load_state_dict(bonus.state_dict())
    restored.update(40_300, reading(1.0))
    bonus.update(40_300, reading(1.0))  # 300 updates since the last reading, both
    assert restored.held == bonus.held > 0


def test_the_targets_pace_is_tau_over_its_interval_or_1_without_targets():
    from rltrain.utils.diagnosis.watch import target_pace

    assert target_pace(config_from_dict({"algo": "td3", "tau": 0.01})) == 0.01
    assert target_pace(config_from_dict(
        {"algo": "sac", "tau": 0.01, "sac": {"target_update_interval": 2}})) == 0.005
    assert target_pace(config_from_dict({"algo": "crossq"})) == 1.0


def test_norms_before_clipping_are_rebuilt_from_the_global_norm():
    after = {"a": 3.0, "b": 4.0, "c": None}  # global 5 after clipping
    assert pre_clip(after, 50.0) == {"a": 30.0, "b": 40.0, "c": None}


def test_drop_detection_is_sign_aware():
    negative = DropDetector(0.3, alpha=1.0)
    assert negative.update(-100.0) is None
    assert negative.update(-125.0) is None  # 25% worse: not a drop
    assert negative.update(-200.0) == -125.0  # 60% worse than the baseline
    positive = DropDetector(0.3, alpha=1.0)
    positive.update(100.0)
    assert positive.update(65.0) == 100.0


def test_a_timed_call_inside_another_is_counted_once(monkeypatch):
    import types

    from rltrain.utils.diagnosis.measure import timing
    from rltrain.utils.diagnosis.measure.timing import timed

    clock = {"now": 0.0}  # the diagnostics' clock, advanced by the calls' own work
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))

    class Diagnostics:
        seconds, timing = 0.0, False

        @timed
        def outer(self):
            clock["now"] += 0.01
            self.inner()

        @timed
        def inner(self):
            clock["now"] += 0.1

    diagnostics = Diagnostics()
    diagnostics.outer()
    assert diagnostics.seconds == pytest.approx(0.11)  # counted twice it would be 0.21
    assert not diagnostics.timing
    diagnostics.inner()
    assert diagnostics.seconds == pytest.approx(0.21)


def test_an_actor_without_any_gradient_is_an_infinite_imbalance():
    # It used to be logged as 0 (perfect balance) exactly when it was infinite.
    import torch

    from rltrain.utils.diagnosis.measure.gradients import GradientWatch

    watch = types.SimpleNamespace(agent=types.SimpleNamespace(
        actor=torch.nn.Linear(2, 2), critic=torch.nn.Linear(2, 2)))
    imbalance = functools.partial(GradientWatch._imbalance, watch)
    assert imbalance({"w": 0.0}, {"w": 1.0}) == math.inf
    assert imbalance({"w": 0.0}, {"w": 0.0}) == 0.0
    assert 0 < imbalance({"w": 1.0}, {"w": 2.0}) < math.inf


def test_diagnose_lists_the_return_drops_the_run_detected(tmp_path):
    # They were only files in traces/; diagnose did not mention them.
    import json

    from rltrain.utils.diagnosis.report.findings import diagnose

    lines = {"events.jsonl": [{"env_steps": 500, "rule": "q_overestimation", "value": 0.6,
                               "threshold": 0.5, "action": "warn", "message": "Q high"}],
             "flow1.jsonl": [{"kind": "reward_drop", "env_steps": 300, "reason": "first"},
                             {"kind": "reward", "env_steps": 400},
                             {"kind": "reward_drop", "env_steps": 900, "reason": "second"}]}
    for name, rows in lines.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = diagnose(tmp_path)["findings"]
    assert [(f["rule"], f["severity"]) for f in found] == [("q_overestimation", "warning"),
                                                           ("reward_drop", "info")]
    assert found[1] == {"rule": "reward_drop", "step": 900, "first_step": 300, "count": 2,
                        "evidence": [300, 900], "severity": "info", "message": "second",
                        "suggested_set": {}, "caused_by": []}


def test_a_time_limit_streak_needs_terminated_episodes_of_one_length():
    from rltrain.utils.diagnosis.measure.episode_ends import EpisodeEnds

    ends = EpisodeEnds(window=100)
    for _ in range(4):
        ends.add(200, terminated=True)
    assert (ends.streak, ends.streak_length) == (4, 200)
    ends.add(200, terminated=False)  # truncated at the limit, as it should be
    assert ends.streak == 0
    for length in (200, 200, 150):  # a different length starts a new streak
        ends.add(length, terminated=True)
    assert (ends.streak, ends.streak_length) == (1, 150)
    for _ in range(5):  # one-step tasks (bandits) end terminated by design
        ends.add(1, terminated=True)
    assert ends.streak == 0
    restored = EpisodeEnds(window=100)
    restored.load_state_dict(ends.state_dict())
    assert restored.state_dict() == ends.state_dict()


def test_the_horizon_share_is_gammas_horizon_over_the_mean_episode_length():
    from rltrain.utils.diagnosis.measure.episode_ends import MIN_EPISODES, EpisodeEnds

    ends = EpisodeEnds(window=3)
    for length in (100, 300, 200, 200):  # the window keeps the last 3
        ends.add(length, terminated=False)
    assert ends.horizon_share(0.5) is None  # fewer than MIN_EPISODES
    ends = EpisodeEnds(window=100)
    for _ in range(MIN_EPISODES):
        ends.add(200, terminated=False)
    assert ends.horizon_share(0.5) == pytest.approx(2 / 200)
    assert ends.horizon_share(0.99) == pytest.approx(100 / 200)
    assert ends.horizon_share(1.0) is None  # no horizon: nothing to compare


def test_observation_stats_find_far_from_unit_and_unchanged_dimensions():
    import torch

    from rltrain.utils.diagnosis.measure.inputs import SCALE_ROWS, observation_stats

    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(1500, 4, generator=gen)
    next_obs = obs + 0.1 * torch.randn(1500, 4, generator=gen)
    obs[:, 1] *= 1000  # unnormalised
    next_obs[:, 2] = obs[:, 2]  # a step that returns this dimension unchanged
    obs[:, 3], next_obs[:, 3] = 0.0, 0.0  # a constant (stuck) sensor
    next_obs[700, 3] = 1.0  # ... but an event flag that moved once in the newest 1000 is not
    stats = observation_stats(obs, next_obs, frozen_rows=1000)
    assert stats["rms"][1] == pytest.approx(1000 * float(obs[-SCALE_ROWS:, 0].std()), rel=0.1)
    assert max(stats["rms"][0], stats["rms"][2]) < 2
    assert stats["scale"] == pytest.approx(stats["rms"][1] / 2)  # over sqrt(4 dimensions)
    assert stats["frozen"] == [2]
    assert observation_stats(obs[:999], next_obs[:999], frozen_rows=1000)["frozen"] == []


def _transitions(effect, n: int = 1000, seed: int = 0, envs: int = 1, actions: int = 1):
    """Random actions in [-1, 1] on a random walk `x`; `effect(a)` (of the action row) is
    added to the next x. Rows of `envs` envs in turn, as the trainer stores them."""
    import torch

    from rltrain.utils.training.replay_buffer import Batch

    rng = np.random.default_rng(seed)
    taken = rng.uniform(-1, 1, (n, actions))
    x, rows = np.zeros(envs), []
    for t in range(n):
        env = t % envs
        before = x[env]
        x[env] = before + rng.normal() + effect(taken[t] if actions > 1 else taken[t, 0])
        rows.append((before, x[env]))
    obs, nxt = (torch.tensor([[r[i]] for r in rows], dtype=torch.float32) for i in (0, 1))
    return Batch(obs, torch.tensor(taken, dtype=torch.float32), torch.zeros(n, 1), nxt,
                 torch.zeros(n, 1))


@pytest.mark.parametrize("effect, lo, hi, seen_as", [
    (lambda a: 0.0, 0.0, 1.5, None),  # ignored
    (lambda a: a, 4.0, 99.0, "value"),  # a push in its direction
    (lambda a: 2 * abs(a), 4.0, 99.0, "distance from mean"),  # only how hard
])
def test_the_action_effect_is_in_units_of_chances_strongest_sum(effect, lo, hi, seen_as):
    from rltrain.utils.diagnosis.measure.action_effect import action_effect

    found = [action_effect(_transitions(effect, seed=seed)) for seed in range(5)]
    assert all(lo <= f["action_effect"] < hi for f in found), found
    if seen_as:
        assert {f["as"] for f in found} == {seen_as}


def test_an_effect_through_the_state_counts_and_an_echo_of_the_action_does_not():
    """Reward a * context (zero on average over contexts) is an effect; an observation
    that repeats the action while the env ignores it is not."""
    import torch

    from rltrain.utils.diagnosis.measure.action_effect import action_effect

    batch = _transitions(lambda a: 0.0)
    context = torch.randn(1000, 1)
    bandit = batch._replace(obs=context, next_obs=torch.randn(1000, 1),
                            rewards=batch.actions * context)
    found = action_effect(bandit)
    assert found["action_effect"] > 4 and found["as"] == "value x observation 0"
    echo = batch._replace(obs=torch.cat([batch.obs, torch.zeros(1000, 1)], 1),
                          next_obs=torch.cat([batch.next_obs, batch.actions], 1))
    found = action_effect(echo)
    assert found["echoes"] == [1] and found["action_effect"] < 1.5


def test_action_dimensions_that_act_only_together_count_for_both():
    from rltrain.utils.diagnosis.measure.action_effect import action_effect

    found = action_effect(_transitions(lambda a: 2 * a[0] * a[1], actions=2))
    assert min(found["per_dimension"]) > 4 and found["as"] == "value x action 1", found


def test_each_action_dimension_is_judged_and_one_unused_is_an_info_note():
    from rltrain.utils.config.loader import config_from_dict
    from rltrain.utils.diagnosis.measure.action_effect import action_effect
    from rltrain.utils.diagnosis.rules.input_rules import IgnoredAction
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    found = action_effect(_transitions(lambda a: a[0], actions=3))
    assert found["per_dimension"][0] > 4 and max(found["per_dimension"][1:]) < 1.5
    rule = IgnoredAction(RuleContext(config_from_dict({}), 1, 3))
    [finding] = rule.check(1000, found)
    assert finding.rule == "ignored_action" and finding.value == [1, 2] \
        and finding.action == "info"  # an observation
    [finding] = rule.check(1000, action_effect(_transitions(lambda a: 0.0, actions=3)))
    assert finding.value < 1.5 and finding.action != "info" \
        and "does the env apply the action?" in finding.message


def test_the_action_effect_follows_each_env_in_a_vector_and_stops_at_episode_ends():
    """Two envs' rows in turn; the action shows one step late in its own env only."""
    import torch

    from rltrain.utils.diagnosis.measure.action_effect import action_effect
    from rltrain.utils.training.replay_buffer import Batch

    batch = _transitions(lambda a: 0.0, n=2000, envs=2)
    late = batch.next_obs.clone()
    late[2:] += 0.5 * batch.actions[:-2]  # row t's action moves its env's next step
    obs = batch.obs.clone()
    obs[2:] = late[:-2]  # each env's next row starts where its last one ended
    shifted = Batch(obs, batch.actions, batch.rewards, late, batch.terminated)
    found = action_effect(shifted, stride=2)
    assert found["lag"] == 1 and found["action_effect"] > 4, found
    assert action_effect(shifted, stride=1)["action_effect"] < 1.5  # the wrong env's rows
    cut = Batch(obs + torch.arange(2000.0)[:, None], *shifted[1:])  # every row a new episode
    assert action_effect(cut, stride=2)["lag"] == 0


def test_the_typical_reward_is_the_warm_ups():
    """MountainCarContinuous: random warm-up actions cost about 0.03 a step; a policy
    that learned to stand still earns |r| of 1e-5 a step. The typical |r| is the
    warm-up's, so standing still does not make the rewards "too small"; without a
    warm-up, the largest episode's."""
    from rltrain.utils.diagnosis.measure.reward_signal import RewardAnalyzer

    rng = np.random.default_rng(0)
    warm, cold = RewardAnalyzer(window=5, warmup=100), RewardAnalyzer(window=5)
    for analyzer in (warm, cold):
        for scale in (5e-3, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5):
            for r in -scale * rng.uniform(0.5, 1.5, 999):
                analyzer.add(float(r) * (30.0 if analyzer.steps < 100 else 1.0))
            analyzer.end_episode()
    assert warm.stats()["typical_from_warmup"] == 1.0 and 0.1 < warm.stats()["typical_abs"] < 0.2
    assert cold.stats()["typical_from_warmup"] == 0.0
    assert 4e-3 < cold.stats()["typical_abs"] < 7e-3  # the first episode's, out of the window
    for analyzer in (warm, cold):
        again = RewardAnalyzer(window=5, warmup=analyzer.warmup)
        again.load_state_dict(analyzer.state_dict())
        assert again.stats() == analyzer.stats()


def test_the_reward_scale_rule_judges_the_largest_and_the_typical_reward():
    from rltrain.utils.diagnosis.rules.reward_rules import RewardScale
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    rule = RewardScale(RuleContext(config_from_dict({}), 3, 1))  # threshold 3: 1e-3 .. 1e3
    assert rule.check(9, {"max_abs": 16.0, "median_abs": 5.0}, 10) == []
    [tiny] = rule.check(9, {"max_abs": 2e-4, "median_abs": 1e-4}, 10)
    assert tiny.rule == "reward_scale" and tiny.value == 2e-4 and tiny.message == (
        "the largest |reward| so far is 0.0002: rewards this small give the critic almost "
        "nothing to fit; scale the rewards in the env, or train a new run with --set "
        "normalize.rewards=true") and tiny.suggested_set == {"normalize.rewards": True}
    # Pendulum's rewards x 1e-4: the largest is above 1e-3, the typical one below.
    [typical] = rule.check(9, {"max_abs": 1.6e-3, "median_abs": 4e-4, "typical_abs": 4e-4},
                           10)
    assert typical.value == 4e-4 and "every episode so far earned at most a typical " \
        "non-zero |reward| of 0.0004" in typical.message
    # A sparse reward's zeros do not make it small.
    assert rule.check(9, {"max_abs": 1.0, "median_abs": 0.0, "typical_abs": 1.0}, 10) == []
    [large] = rule.check(9, {"max_abs": 5e4, "median_abs": 2e3}, 10)
    assert large.value == 2e3 and "the typical |reward| is 2e+03" in large.message
    normalised = RewardScale(RuleContext(config_from_dict(
        {"normalize": {"rewards": True}}), 3, 1))
    assert normalised.check(9, {"max_abs": 2e-4, "median_abs": 1e-4}, 10)[0].suggested_set \
        == {}
    off = RewardScale(RuleContext(config_from_dict(
        {"diagnostics": {"reward_scale": {"action": "off"}}}), 3, 1))
    assert off.check(9, {"max_abs": 2e-4, "median_abs": 1e-4}, 10) == []


def test_a_reward_paid_at_few_steps_is_a_sparse_warning_not_spikes():
    """Pendulum's reward summed up and paid on an episode's last step: 199 steps of 0,
    then about -1000. `sparse_reward` warns; `reward_spikes` leaves it to it. A reward
    that varies at every step, or never varies, is neither."""
    from rltrain.utils.diagnosis.rules.reward_rules import RewardSpikes, SparseReward
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    context = RuleContext(config_from_dict({}), 3, 1)
    rng = np.random.default_rng(0)
    paid_at_end = np.zeros(20 * 200)
    paid_at_end[199::200] = -rng.uniform(500, 1500, 20)
    stats = reward_stats(paid_at_end, returns())
    assert stats["same_share"] == pytest.approx(0.995)
    [sparse] = SparseReward(context).check(9, stats, 20)
    assert sparse.action == "warn" and sparse.value == 0.995 and sparse.message.startswith(
        "99.5% of the steps of the last 20 episodes give one same reward")
    assert RewardSpikes(context).check(9, stats, 20) == []
    for dense in (rng.normal(-5.0, 2.0, 4000), np.full(4000, -1.0)):
        assert SparseReward(context).check(9, reward_stats(dense, returns()), 20) == []


@pytest.mark.parametrize("terminated, fires", [(False, True), (True, False)])
def test_a_constant_reward_carries_the_signal_where_episodes_end_terminated(terminated, fires):
    """CartPole's +1 a step until the pole falls: the return is the episode's length,
    which the actions decide; the same +1 cut only by a time limit says nothing."""
    from rltrain.utils.diagnosis.rules.reward_rules import ConstantReward
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    analyzer = RewardAnalyzer(window=5)
    for length in (12, 30, 9, 51, 20):
        for _ in range(length):
            analyzer.add(1.0)
        analyzer.end_episode(terminated=terminated and length != 51)  # one truncated
    stats = analyzer.stats()
    assert stats["cv"] == 0.0
    rule = ConstantReward(RuleContext(config_from_dict({}), 3, 1))
    assert bool(rule.check(100, stats, 5)) == fires


@pytest.mark.parametrize("reward, action", [(0.0, "warn"), (1.0, "warn"), (-1.0, "info")])
def test_a_constant_penalty_before_any_episode_ends_is_a_note(reward, action):
    """MountainCar's -1 a step, every episode cut by its time limit until the goal is
    found: a task that pays for ending sooner, not a reward that ignores the actions (a
    note); a constant 0 or +1 cut only by the time limit is the warning."""
    from rltrain.utils.diagnosis.rules.reward_rules import ConstantReward
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    analyzer = RewardAnalyzer(window=5)
    for _ in range(5):
        for _ in range(200):
            analyzer.add(reward)
        analyzer.end_episode(terminated=False)
    stats = analyzer.stats()
    [found] = ConstantReward(RuleContext(config_from_dict({}), 3, 1)).check(1000, stats, 5)
    assert found.action == action
    assert ("time limit" in found.message) == (reward < 0)


@pytest.mark.parametrize("reward, action", [(1.0, "info"), (0.0, "warn")])
def test_an_alive_bonus_earned_to_the_time_limit_is_a_note(reward, action):
    """CartPole solved: every episode of the window reaches its 500-step limit, each
    step +1, after earlier episodes ended when the pole fell: the return still says how
    long an episode lasts (a note). A constant 0 says nothing, terminations or not."""
    from rltrain.utils.diagnosis.rules.reward_rules import ConstantReward
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    analyzer = RewardAnalyzer(window=5)
    for length, terminated in [(12, True), (40, True)] + [(500, False)] * 5:
        for _ in range(length):
            analyzer.add(reward)
        analyzer.end_episode(terminated=terminated)
    resumed = RewardAnalyzer(window=5)
    resumed.load_state_dict(analyzer.state_dict())
    stats = resumed.stats()
    assert stats["terminated_share"] == 0.0 and stats["terminations"] == 2.0
    [found] = ConstantReward(RuleContext(config_from_dict({}), 3, 1)).check(1000, stats, 5)
    assert found.action == action
    assert ("alive bonus" in found.message) == (reward > 0)


def test_the_actors_rank_is_the_same_measured_in_parts(monkeypatch):
    """The candidates are valued CHUNK rows at a time (a bounded allocation): the same
    statistics as all at once."""
    import torch

    from rltrain.scripts.training.agent_setup import agent_view, build_agent
    from rltrain.utils.diagnosis.measure import fit

    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    agent, _ = build_agent(config_from_dict({"algo": "sac"}), 3, low, high, DEVICE)
    view, obs = agent_view(agent, low, high), torch.randn(64, 3)
    parts = fit.actor_rank(view, obs, torch.Generator().manual_seed(0), 1.0)
    monkeypatch.setattr(fit, "CHUNK", 10**9)
    whole = fit.actor_rank(view, obs, torch.Generator().manual_seed(0), 1.0)
    monkeypatch.setattr(fit, "CHUNK", 100)  # parts that split a state's candidates
    split = fit.actor_rank(view, obs, torch.Generator().manual_seed(0), 1.0)
    for measured in (parts, split):  # the same up to float32 rounding of the products
        assert measured == pytest.approx(whole, rel=1e-6)


def test_finite_rows_is_is_finite_for_each_env_of_a_vector_step():
    from rltrain.utils.diagnosis.rules.health.non_finite import finite_rows, is_finite

    obs = np.zeros((4, 3), np.float32)
    actions = np.zeros((4, 1), np.float32)
    rewards = np.zeros(4)
    obs[1, 2], actions[2, 0], rewards[3] = np.nan, np.inf, -np.inf
    expected = [is_finite(obs[i], actions[i], float(rewards[i])) for i in range(4)]
    assert finite_rows(obs, actions, rewards).tolist() == expected == [True, False, False, False]



@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_all_finite_finds_one_bad_value_among_arrays_of_any_dtype(bad):
    from rltrain.utils.diagnosis.rules.health.non_finite import all_finite

    obs, actions = np.zeros((8, 3), np.float32), np.ones((8, 1), np.int64)
    rewards = np.arange(8, dtype=np.float64)
    assert all_finite(rewards, obs, actions)
    obs[5, 1] = bad
    assert not all_finite(rewards, obs, actions)
    assert not all_finite(np.array([np.inf, -np.inf]))  # a sum of NaN


def test_all_finite_checks_values_where_their_sum_overflows():
    from rltrain.utils.diagnosis.rules.health.non_finite import all_finite

    big = np.full(4, np.finfo(np.float32).max, np.float32)  # its float32 sum is inf
    assert all_finite(big, np.array([1e308, 1e308]))
    big[2] = np.inf
    assert not all_finite(big)

def test_short_horizon_fires_for_a_horizon_of_a_few_steps_not_rl_zoos_shortest():
    """Its threshold lies between gamma 0.6 on Hopper (2.5 steps, about 4% of its mean
    episode) and RL Zoo's shortest tuned horizon (gamma 0.9 on Pendulum's 200 steps:
    5%)."""
    from rltrain.utils.diagnosis.measure.episode_ends import EpisodeEnds
    from rltrain.utils.diagnosis.rules.input_rules import ShortHorizon
    from rltrain.utils.diagnosis.rules.spec import RuleContext

    def check(gamma: float, lengths: list[int]) -> list:
        rule = ShortHorizon(RuleContext(config_from_dict({"gamma": gamma}), 3, 1))
        share = EpisodeEnds(100)
        for length in lengths:
            share.add(length, True)
        return rule.check(1000, share.horizon_share(gamma), share.lengths)

    assert check(0.6, [60] * 10)  # 2.5 of 60 steps: 0.042
    assert not check(0.9, [200] * 10)  # 10 of 200: 0.05
    assert not check(0.99, [1000] * 10)  # 100 of 1000: 0.1
    assert check(0.99, [2500] * 10)  # 100 of 2500: 0.04
