"""Updates told at once (`Update.count`): a library that reports one mean over a call's
gradient steps (SB3, RLlib) hands them on in one record; a hook that takes batches
(`Hook.update_batches`) is called once, any other once per update, as before."""

from __future__ import annotations

from types import SimpleNamespace

from rltrain.utils.diagnosis.watch import Flow1Diagnostics
from rltrain.utils.hooks.hook import Hook, HookList, Update
from rltrain.utils.run.metrics import RunMetrics


class Recorder(Hook):
    def __init__(self, batches: bool) -> None:
        self.update_batches = batches
        self.seen: list[tuple[int, int, int]] = []

    def on_update(self, update: Update) -> list:
        self.seen.append((update.env_steps, update.updates, update.count))
        return [f"{update.updates}"] if update.updates % 2 == 0 else []


def test_a_batch_reaches_a_batch_hook_once_and_any_other_hook_once_per_update():
    batch, single, found = Recorder(True), Recorder(False), []
    hooks = HookList([batch, single], found.extend)
    hooks.on_update(Update(500, 10, {"loss": 1.0}, count=3))
    assert batch.seen == [(500, 10, 3)]
    assert single.seen == [(500, 8, 1), (500, 9, 1), (500, 10, 1)]
    assert found == ["10", "8", "10"]  # each hook's findings, in the hooks' order
    hooks.on_update(Update(600, 11, {"loss": 1.0}))  # one update: one call each, as ever
    assert batch.seen[-1] == (600, 11, 1) and single.seen[-1] == (600, 11, 1)


def test_an_update_of_one_is_its_own_record():
    one = Update(5, 7, {"loss": 0.5})
    assert one.each() == [one]
    assert [u.updates for u in Update(5, 7, {}, count=4).each()] == [4, 5, 6, 7]


def test_the_losses_of_a_batch_count_once_per_update_in_the_logged_means():
    metrics = RunMetrics.__new__(RunMetrics)
    metrics.loss_window, metrics.updates = {}, 0
    metrics.on_update(Update(100, 3, {"loss": 2.0}, count=3))
    metrics.on_update(Update(200, 4, {"loss": 6.0}))
    assert metrics.loss_window == {"loss": [2.0, 2.0, 2.0, 6.0]} and metrics.updates == 4


class Calls:
    """Stands in for one of the flow-1 measurements: records its `after_update` calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, ...]] = []

    def after_update(self, *args: int) -> None:
        self.calls.append(args)

    def update(self, *args: object) -> None:  # the entropy bonus's
        self.calls.append(args[:1])

    def record(self, env_steps: int, *rest: object) -> None:  # the gradient watch's
        self.calls.append((env_steps,))


def test_the_flow1_diagnostics_measure_after_each_update_of_a_batch():
    d = Flow1Diagnostics.__new__(Flow1Diagnostics)
    parts = ("inputs", "entropy_bonus", "fit", "noise", "q_values", "observability",
             "gradients")
    for name in parts:
        setattr(d, name, Calls())
    d.map = SimpleNamespace(collecting=True)
    d.settings = SimpleNamespace(grad_freq=2)
    d.reward = SimpleNamespace(max_abs=1.0)
    d.actor_pre_clip, d.pending, d.timing, d.seconds = None, [], False, 0.0
    d.on_update(Update(300, 6, {"critic_grad_norm": 1.0}, count=3))
    for name in ("inputs", "fit", "noise", "q_values", "observability"):
        assert getattr(d, name).calls == [(300, 4), (300, 5), (300, 6)]
    assert d.entropy_bonus.calls == [(4,), (5,), (6,)]
    assert d.gradients.calls == [(300,), (300,)]  # at updates 4 and 6: grad_freq 2
    assert d.map.collecting  # the map collects again after the measurements
