"""Small environments for tests, importable as "fake_envs:FakePoint-v0" by gymnasium.make,
and the planted faults the tests and benchmarks/calibration.py share."""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PointEnv(gym.Env):
    """Move a point toward 0 on a line; actions in asymmetric bounds [low, high]."""

    def __init__(self, low: float = 0.0, high: float = 4.0, horizon: int = 20) -> None:
        self.action_space = spaces.Box(np.float32(low), np.float32(high), (1,), np.float32)
        self.observation_space = spaces.Box(-10, 10, (2,), np.float32)
        self.horizon, self._t, self._x = horizon, 0, 0.0
        self._center = (low + high) / 2

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._x = 0, float(self.np_random.uniform(-1, 1))
        return self._obs(), {}

    def step(self, action):
        self._x += 0.1 * float(action[0] - self._center)
        self._t += 1
        reward = -abs(self._x)
        return self._obs(), reward, False, self._t >= self.horizon, {}

    def _obs(self) -> np.ndarray:
        return np.array([self._x, self._t / self.horizon], dtype=np.float32)


class WeakPointEnv(PointEnv):
    """PointEnv whose actions move the point 100x less: the policy pushes the bounds."""

    def step(self, action):
        self._x += 0.001 * float(action[0] - self._center)
        self._t += 1
        return self._obs(), -abs(self._x), False, self._t >= self.horizon, {}


class DiscreteEnv(PointEnv):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.Discrete(3)


class MultiDiscreteEnv(PointEnv):
    """Two discrete choices at each step: a space the SB3 callback does not watch."""

    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.MultiDiscrete([3, 3])

    def step(self, action):
        return super().step(np.asarray(action[:1], np.float32))


class NaNReward(gym.Wrapper):
    """Pendulum whose reward is NaN at one step of every episode (a planted fault)."""

    def __init__(self, at_step: int = 120) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.at_step, self._t = at_step, 0

    def reset(self, **kwargs):
        self._t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        return obs, float("nan") if self._t == self.at_step else reward, terminated, \
            truncated, info


class CountedSteps(gym.Wrapper):
    """An env that acts at its `at`-th step, counted over every episode of this env
    instance (a vector env's each count their own)."""

    def __init__(self, env_id: str = "CartPole-v1", at: int = 150) -> None:
        super().__init__(gym.make(env_id))
        self.at, self._steps = at, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if self._steps == self.at:
            reward = self.at_step(reward)
        return obs, reward, terminated, truncated, info

    def at_step(self, reward: float) -> float:
        raise NotImplementedError


class NaNRewardOnce(CountedSteps):
    """A NaN reward at the env's `at`-th step (a planted fault)."""

    def at_step(self, reward: float) -> float:
        return float("nan")


class PauseAsking(CountedSteps):
    """`rltrain pause $RLTRAIN_TEST_PAUSE_RUN --no-wait` at the env's `at`-th step: a
    request from outside that reaches a loop at a step the test knows."""

    def at_step(self, reward: float) -> float:
        from click.testing import CliRunner

        from rltrain.scripts.cli import cli

        result = CliRunner().invoke(cli, ["pause", os.environ["RLTRAIN_TEST_PAUSE_RUN"],
                                          "--no-wait"])
        assert result.exit_code == 0, result.output
        return reward


class SpikyPendulum(gym.Wrapper):
    """Pendulum with a rare -1000 "collision" penalty (a x1000 fault)."""

    def __init__(self, probability: float = 0.005, penalty: float = -1000.0) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.probability, self.penalty = probability, penalty

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.np_random.random() < self.probability:
            reward += self.penalty
        return obs, reward, terminated, truncated, info


class ScaledPendulum(gym.Wrapper):
    """Pendulum with rewards multiplied by `scale` (1e-5: too small to learn from)."""

    def __init__(self, scale: float = 1e-5) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info


class WeakPendulum(gym.Wrapper):
    """Pendulum whose torque is divided by 10: too weak, so the policy pushes the bounds."""

    def step(self, action):
        return self.env.step(np.asarray(action) / 10.0)


class AtStepPendulum(gym.Wrapper):
    """Pendulum that calls `at_step()` before its `at`-th step (counted over the env's
    life): a planted event at a known step."""

    def __init__(self, at: int) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.at, self.steps = at, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.at:
            self.at_step()
        return self.env.step(action)

    def at_step(self) -> None:
        raise NotImplementedError


class KillOncePendulum(AtStepPendulum):
    """Pendulum whose process kills itself (SIGKILL) once, at its `at`-th step, the first
    time any process runs it: marked by the file named in $RLTRAIN_TEST_KILL_MARKER.
    A stand-in for a worker dying mid-run (OOM killer, preempted node)."""

    def __init__(self, at: int = 250) -> None:
        super().__init__(at)

    def at_step(self) -> None:
        import signal
        from pathlib import Path

        marker = os.environ.get("RLTRAIN_TEST_KILL_MARKER")
        if marker and not Path(marker).exists():
            Path(marker).write_text("killed once")
            os.kill(os.getpid(), signal.SIGKILL)


class CrashingPendulum(gym.Wrapper):
    """Pendulum whose step raises at its `at`-th step (counted over the env's life) while
    `CrashingPendulum.broken` is true: an env with a bug, and the same env once fixed.
    Not an AtStepPendulum: the tests name the line of `step` the exception comes from."""

    broken = True

    def __init__(self, at: int = 150, message: str = "simulator crashed") -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.at, self.steps, self.message = at, 0, message

    def step(self, action):
        self.steps += 1
        if CrashingPendulum.broken and self.steps == self.at:
            raise RuntimeError(self.message)
        return self.env.step(action)


class BrokenResetPendulum(gym.Wrapper):
    """Pendulum whose reset breaks Gymnasium's API (no info dict) from its second call
    on while `BrokenResetPendulum.broken` is true: an env's bug that shows only when its
    first episode ends."""

    broken = True

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.resets = 0

    def reset(self, **kwargs):
        self.resets += 1
        obs, info = self.env.reset(**kwargs)
        return obs if BrokenResetPendulum.broken and self.resets > 1 else (obs, info)


class WideActionPendulum(gym.ActionWrapper):
    """Pendulum whose action Box claims +/-3e38 (it clips to its real +/-2): its range
    overflows float32, and random actions and noise became inf, then NaN."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.action_space = gym.spaces.Box(-3e38, 3e38, (1,), np.float32)

    def action(self, action):
        return np.clip(action, -2.0, 2.0)


class MutatingPendulum(gym.Wrapper):
    """Pendulum whose step clips the action it is given in place (to +/-0.5): code that
    writes into the caller's array."""

    def step(self, action):
        np.clip(action, -0.5, 0.5, out=action)
        return self.env.step(action)


class CloseFailingPendulum(gym.Wrapper):
    """Pendulum whose close() raises: an env with a bug in its clean-up only."""

    def close(self):
        raise RuntimeError("renderer already gone")


class ExitingPendulum(gym.Wrapper):
    """Pendulum whose step raises `error` (SystemExit(0), KeyboardInterrupt) at its
    150th step: env code that exits or interrupts instead of raising an error."""

    def __init__(self, error: str = "exit") -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.error, self.steps = error, 0

    def step(self, action):
        self.steps += 1
        if self.steps == 150:
            raise SystemExit(0) if self.error == "exit" else KeyboardInterrupt()
        return self.env.step(action)


class HangingPendulum(gym.Wrapper):
    """Pendulum whose step never returns at its 150th step while `HangingPendulum.broken`
    (a simulator waiting forever). So that tests need not wait 30 s for the run to say it
    is stuck, it shortens that notice to half a second in the process that makes it."""

    broken = True

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.steps = 0
        from rltrain.utils.training.env_clock import ENV_CLOCK
        ENV_CLOCK.notice_after = 0.5

    def step(self, action):
        self.steps += 1
        while HangingPendulum.broken and self.steps == 150:
            time.sleep(0.05)
        return self.env.step(action)


class WordyPendulum(gym.Wrapper):
    """Pendulum whose step says terminated="yes" at its 150th step."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.steps = 0

    def step(self, action):
        self.steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, "yes" if self.steps == 150 else terminated, truncated, info


class GlobalRandomPendulum(gym.Wrapper):
    """Pendulum whose rewards get noise from Python's and NumPy's global generators, as
    careless env code does."""

    def step(self, action):
        import random

        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + np.random.normal() + random.random(), terminated, truncated, info


class ConstantRewardPendulum(gym.Wrapper):
    """Pendulum whose reward is always 0, whatever the state and action (a reward never
    set)."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, 0.0, terminated, truncated, info


class TimeLimitTerminalPendulum(gym.Wrapper):
    """Pendulum whose time limit is reported as `terminated`, as code that stores
    `done = terminated or truncated` does."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or truncated, False, info


class ScaledObservationPendulum(gym.ObservationWrapper):
    """Pendulum whose angular velocity is in thousandths (x1000): an unnormalised input."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        high = np.array([1.0, 1.0, 8000.0], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

    def observation(self, obs):
        return obs * np.float32([1, 1, 1000])


class StaleObservationPendulum(gym.Wrapper):
    """Pendulum whose step() returns the reset observation: the agent never sees the
    state move (rewards still follow the real state)."""

    def reset(self, **kwargs):
        self._first, info = self.env.reset(**kwargs)
        return self._first, info

    def step(self, action):
        _, reward, terminated, truncated, info = self.env.step(action)
        return self._first.copy(), reward, terminated, truncated, info


class StuckSensorPendulum(gym.ObservationWrapper):
    """Pendulum whose angular velocity reads 0 always: one stuck dimension of three."""

    def observation(self, obs):
        return obs * np.float32([1, 1, 0])


class IgnoredActionPendulum(gym.ActionWrapper):
    """Pendulum that never applies the agent's action (it passes 0 on): a wrapper bug."""

    def action(self, action):
        return np.zeros_like(action)


class DelayedActionPendulum(gym.ActionWrapper):
    """Pendulum that applies each action one step late (the first step gets 0): actuator
    latency, healthy for ignored_action."""

    def reset(self, **kwargs):
        self._previous = np.zeros(self.action_space.shape, self.action_space.dtype)
        return self.env.reset(**kwargs)

    def action(self, action):
        applied, self._previous = self._previous, np.asarray(action, self.action_space.dtype)
        return applied


class ContextBandit(gym.Env):
    """One-step episodes: a random context c in the observation, reward a * c. The action
    matters only through the state, so on average an action is worth nothing."""

    def __init__(self) -> None:
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)
        self.observation_space = spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._c = self.np_random.uniform(-1, 1, (1,)).astype(np.float32)
        return self._c.copy(), {}

    def step(self, action):
        reward = float(action[0] * self._c[0])
        self._c = self.np_random.uniform(-1, 1, (1,)).astype(np.float32)
        return self._c.copy(), reward, True, False, {}


class HeadingVehicle(gym.Env):
    """A vehicle pushed along its heading, which turns by itself: the action moves x and y
    by a * cos(heading) and a * sin(heading), zero on average over headings."""

    def __init__(self) -> None:
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._p = 0, self.np_random.uniform(-1, 1, 2)
        self._heading = float(self.np_random.uniform(0, 2 * np.pi))
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([*self._p, np.cos(self._heading), np.sin(self._heading)], np.float32)

    def step(self, action):
        self._p = self._p + 0.05 * float(action[0]) * np.array(
            [np.cos(self._heading), np.sin(self._heading)])
        self._heading += 0.3
        self._t += 1
        return self._obs(), -float(np.linalg.norm(self._p)), False, self._t >= 200, {}


class WrongShapePendulum(gym.Wrapper):
    """Pendulum whose observations have one value more than its space declares."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return np.append(obs, 0.0).astype(np.float32), info


class SlowPendulum(gym.Wrapper):
    """Pendulum whose steps take `delay` seconds after the first `after` steps: time to
    send signals while a step is under way. The first slow step touches
    `slow_step.started` in the working folder, for tests to wait on."""

    def __init__(self, delay: float, after: int) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.delay, self.after, self.steps = delay, after, 0

    def step(self, action):
        import time

        self.steps += 1
        if self.steps > self.after:
            if self.steps == self.after + 1:
                Path("slow_step.started").touch()
            time.sleep(self.delay)
        return self.env.step(action)


class SlowClosingPendulum(gym.Wrapper):
    """Pendulum whose `close` takes 3 s: time to send a signal while a run shuts down."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))

    def close(self):
        import time

        time.sleep(3.0)
        return self.env.close()


class BusyPendulum(gym.Wrapper):
    """Pendulum whose every step also burns CPU time, like a physics simulator: the case
    vector envs are for (benchmarks/vector_envs.py). The cost in seconds comes from
    $BUSY_STEP_SECONDS (default 0.005), which async env workers inherit."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.cost = float(os.environ.get("BUSY_STEP_SECONDS", "0.005"))

    def step(self, action):
        import time

        end = time.perf_counter() + self.cost
        while time.perf_counter() < end:
            pass
        return self.env.step(action)


class GatedPendulum(AtStepPendulum):
    """Pendulum whose `at`-th step waits (up to 120 s) until the file named in
    $RLTRAIN_TEST_GATE exists: holds a run at a known step while a test acts on it.
    While it waits, `<gate>.held.<pid>` exists."""

    def __init__(self, at: int = 250) -> None:
        super().__init__(at)

    def at_step(self) -> None:
        import time
        from pathlib import Path

        gate = os.environ.get("RLTRAIN_TEST_GATE")
        if gate and not Path(gate).exists():
            held = Path(f"{gate}.held.{os.getpid()}")
            held.write_text("")
            deadline = time.monotonic() + 120
            while not Path(gate).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            held.unlink()


class RaiseInitPendulum(gym.Wrapper):
    """Pendulum whose constructor raises from its `fail_from`-th construction on (counted
    in this process), or in any process but the one named by $RLTRAIN_TEST_PARENT_PID
    when that is set: an env that cannot start (a missing licence, a busy port)."""

    made = 0
    fail_from = 1

    def __init__(self) -> None:
        RaiseInitPendulum.made += 1
        parent = os.environ.get("RLTRAIN_TEST_PARENT_PID")
        if (str(os.getpid()) != parent) if parent else self.made >= self.fail_from:
            raise RuntimeError("simulator licence not found")
        super().__init__(gym.make("Pendulum-v1"))


class DriftingPointEnv(PointEnv):
    """Not deterministic under replay: its start depends on how often it was reset."""

    resets = 0

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        DriftingPointEnv.resets += 1
        self._x += 0.01 * DriftingPointEnv.resets
        return self._obs(), info


class TermsPointEnv(PointEnv):
    """PointEnv (actions in [-1, 1]) whose reward is the sum of terms it reports in info,
    as Gymnasium's MuJoCo envs do: `reward_goal` (1 - |x|, a bonus), `reward_ctrl`
    (-ctrl_cost_weight * a^2) and, with `noise`, `reward_noise` (noise drawn from the
    env's seeded generator, not from the action). `as_dict`: the terms as one dict,
    info["reward_terms"] = {"goal": ..., "ctrl": ...}."""

    def __init__(self, ctrl_cost_weight: float = 0.1, noise: float = 0.0,
                 as_dict: bool = False, horizon: int = 20) -> None:
        super().__init__(-1.0, 1.0, horizon)
        self.ctrl_cost_weight, self.noise, self.as_dict = ctrl_cost_weight, noise, as_dict

    def step(self, action):
        obs, _, terminated, truncated, _ = super().step(action)
        terms = {"goal": 1.0 - abs(self._x),
                 "ctrl": -self.ctrl_cost_weight * float(action[0]) ** 2}
        if self.noise:
            terms["noise"] = self.noise * float(self.np_random.normal())
        info = ({"reward_terms": terms} if self.as_dict
                else {f"reward_{k}": v for k, v in terms.items()})
        return obs, sum(terms.values()), terminated, truncated, info


gym.register("FakePoint-v0", entry_point=PointEnv)
gym.register("FakeTermsPoint-v0", entry_point=TermsPointEnv)
gym.register("FakeTwoStepPoint-v0", entry_point=PointEnv, kwargs={"horizon": 2})
gym.register("FakeKillOncePendulum-v0", entry_point=KillOncePendulum)
gym.register("FakeWeakPoint-v0", entry_point=WeakPointEnv)
gym.register("FakeSpikyPendulum-v0", entry_point=SpikyPendulum)
gym.register("FakeScaledPendulum-v0", entry_point=ScaledPendulum)
gym.register("FakeWeakPendulum-v0", entry_point=lambda: WeakPendulum(gym.make("Pendulum-v1")))
gym.register("FakeDriftingPoint-v0", entry_point=DriftingPointEnv)
gym.register("FakeRaiseInitPendulum-v0", entry_point=RaiseInitPendulum)
gym.register("FakeNaNReward-v0", entry_point=NaNReward)
gym.register("FakeNaNCartPole-v0", entry_point=NaNRewardOnce)
gym.register("FakePauseAskingCartPole-v0", entry_point=PauseAsking)
gym.register("FakeStallingPendulum-v0", entry_point=SlowPendulum,
             kwargs={"delay": 30.0, "after": 100})
gym.register("FakeSlowClosingPendulum-v0", entry_point=SlowClosingPendulum)
gym.register("FakeDiscrete-v0", entry_point=DiscreteEnv)
gym.register("FakeMultiDiscrete-v0", entry_point=MultiDiscreteEnv)
gym.register("FakeBusyPendulum-v0", entry_point=BusyPendulum)
gym.register("FakeGatedPendulum-v0", entry_point=GatedPendulum)
gym.register("FakeCrashingPendulum-v0", entry_point=CrashingPendulum)
gym.register("FakeBrokenResetPendulum-v0", entry_point=BrokenResetPendulum)
gym.register("FakeWideActionPendulum-v0", entry_point=WideActionPendulum)
gym.register("FakeMutatingPendulum-v0",
             entry_point=lambda: MutatingPendulum(gym.make("Pendulum-v1")))
gym.register("FakeCloseFailingPendulum-v0",
             entry_point=lambda **kw: CloseFailingPendulum(gym.make("Pendulum-v1", **kw)))
gym.register("FakeExitingPendulum-v0", entry_point=ExitingPendulum)
gym.register("FakeWordyPendulum-v0", entry_point=WordyPendulum)
gym.register("FakeHangingPendulum-v0", entry_point=HangingPendulum)
gym.register("FakeInterruptingPendulum-v0", entry_point=ExitingPendulum,
             kwargs={"error": "interrupt"})
gym.register("FakeGlobalRandomPendulum-v0",
             entry_point=lambda: GlobalRandomPendulum(gym.make("Pendulum-v1")))
gym.register("FakeConstantRewardPendulum-v0",
             entry_point=lambda: ConstantRewardPendulum(gym.make("Pendulum-v1")))
gym.register("FakeTimeLimitTerminalPendulum-v0",
             entry_point=lambda: TimeLimitTerminalPendulum(gym.make("Pendulum-v1")))
gym.register("FakeShortTimeLimitTerminalPendulum-v0",
             entry_point=lambda: TimeLimitTerminalPendulum(gym.make("FakeShortPendulum-v0")))
gym.register("FakeScaledObservationPendulum-v0",
             entry_point=lambda: ScaledObservationPendulum(gym.make("Pendulum-v1")))
gym.register("FakeStaleObservationPendulum-v0",
             entry_point=lambda: StaleObservationPendulum(gym.make("Pendulum-v1")))
gym.register("FakeStuckSensorPendulum-v0",
             entry_point=lambda: StuckSensorPendulum(gym.make("Pendulum-v1")))
gym.register("FakeIgnoredActionPendulum-v0",
             entry_point=lambda: IgnoredActionPendulum(gym.make("Pendulum-v1")))
gym.register("FakeDelayedActionPendulum-v0",
             entry_point=lambda: DelayedActionPendulum(gym.make("Pendulum-v1")))
gym.register("FakeContextBandit-v0", entry_point=ContextBandit)
gym.register("FakeHeadingVehicle-v0", entry_point=HeadingVehicle)
gym.register("FakeWrongShapePendulum-v0",
             entry_point=lambda: WrongShapePendulum(gym.make("Pendulum-v1")))
gym.register("FakeShortPendulum-v0", max_episode_steps=50,
             entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv")


def dead_first_layer(init):
    """A planted broken gradient for the actor: `Actor.__init__` wrapped so that the
    first layer's biases are -1000, which switches every ReLU of that layer off for any
    observation of these envs or Pendulum; no gradient reaches the layer."""
    import torch

    def wrapped(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        torch.nn.init.constant_(self.net[0].bias, -1e3)

    return wrapped
