"""The benchmarks' SB3 models explore as rltrain's runs do: on Pendulum (action bounds
+-2, not +-1) SB3's TD3 set up from an rltrain config (benchmarks/common.py) adds the
same gaussian noise in the env's units as rltrain's exploration."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.common import sb3_td3
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.training.exploration import Exploration

DRAWS = 4000


@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_sb3_and_rltrain_add_the_same_noise_in_the_envs_units(noise):
    np.random.seed(0)  # SB3's NormalActionNoise draws from NumPy's global generator
    config = config_from_dict({"env_name": "Pendulum-v1", "algo": "ddpg",
                               "exploration_noise": noise, "learning_starts": 100,
                               "replay_buffer_size": 1000, "hidden_sizes": [16, 16]})
    model = sb3_td3(config, seed=0)
    model._last_obs = model.env.reset()
    sb3 = np.array([model._sample_action(0, model.action_noise, 1)[0][0, 0]
                    for _ in range(DRAWS)])  # the env's action, in its units
    mean = float(model.predict(model._last_obs, deterministic=True)[0][0, 0])
    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    exploration = Exploration(config, low, high, seed=0)
    ours = np.array([exploration.noisy(np.array([[mean]], np.float32), 0)[0, 0]
                     for _ in range(DRAWS)])
    expected = noise * 2.0  # the noise times Pendulum's half-range
    assert abs(mean) < 1.0  # the untrained policy's action: far from the bounds' clipping
    for actions in (sb3, ours):
        assert np.std(actions) == pytest.approx(expected, rel=0.06)
        assert np.mean(actions) == pytest.approx(mean, abs=0.05)
