"""The algorithm registry: the config's choices and sections, checkpoints that name their
algorithm, and rules that judge only the algorithms they are about."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rltrain.agents.base import BACKEND_KEYS
from rltrain.agents.registry import ALGORITHMS, trained_names
from rltrain.scripts.cli import cli
from rltrain.utils.config.loader import config_from_dict
from rltrain.utils.config.schema import TrainConfig, config_to_dict
from rltrain.utils.diagnosis.rules.registry import rule_hooks
from rltrain.utils.diagnosis.rules.spec import RuleContext
from rltrain.utils.errors import ConfigError
from rltrain.utils.io.checkpoint import load_checkpoint, save_tensors

from conftest import tiny_config


def test_the_config_offers_every_registered_algorithm_and_its_own_section():
    assert set(ALGORITHMS) == {"ddpg", "td3", "sac", "crossq", "tqc", "ppo", "a2c", "dqn"}
    assert trained_names() == ("ddpg", "td3", "sac", "crossq", "tqc")
    for name, entry in ALGORITHMS.items():
        # A watched-only algorithm names a run another library trains (its `library`).
        watched = {} if entry.trained else {"library": {"algorithm": name.upper()}}
        config = config_from_dict({"algo": name, **watched})
        assert config.algo == name
        if entry.section is not None:  # its section, with the options' defaults
            section = getattr(config, entry.section)
            assert dataclasses.asdict(section) == dataclasses.asdict(entry.options())
            assert entry.section in config_to_dict(config)
        others = [e.section for e in ALGORITHMS.values() if e.section and e.name != name]
        assert not set(others) & set(config_to_dict(config))  # shown only with their algo


@pytest.mark.parametrize("raw, message", [
    ({"algo": "td3", "sac": {"ent_coef": 0.1}},
     "config section 'sac' applies only with algo: sac (algo is td3)"),
    ({"algo": "sac", "td3": {"policy_delay": 3}},
     "config section 'td3' applies only with algo: td3 (algo is sac)"),
    ({"algo": "sac", "exploration_noise": 0.5},
     "config key 'exploration_noise' sets action noise, which algo sac does not add"),
    ({"algo": "sac", "noise_type": "ou"},
     "config key 'noise_type' sets action noise, which algo sac does not add"),
    ({"algo": "sac", "sac": {"ent_coef": -0.1}}, "config key 'sac.ent_coef' must be a number > 0"),
    ({"algo": "sac", "sac": {"ent_coef": True}}, "config key 'sac.ent_coef' must be a number"),
    ({"algo": "crossq", "tau": 0.01},
     "config key 'tau' sets the target networks' Polyak rate, and algo crossq keeps no "
     "target network; leave tau out"),
    ({"algo": "crossq", "td3": {"policy_delay": 3}},
     "config section 'td3' applies only with algo: td3 (algo is crossq)"),
    ({"algo": "tqc", "tqc": {"n_quantiles": 5, "top_quantiles_to_drop_per_net": 5}},
     "config key 'tqc.top_quantiles_to_drop_per_net' (5) must be below tqc.n_quantiles (5)"),
    ({"algo": "tqc", "exploration_noise": 0.5},
     "config key 'exploration_noise' sets action noise, which algo tqc does not add"),
])
def test_a_section_or_key_of_another_algorithm_is_one_config_error(raw, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        config_from_dict(raw)


def test_sac_takes_a_word_or_a_number_for_its_temperature():
    assert config_from_dict({"algo": "sac", "sac": {"ent_coef": "auto_0.1"}}).sac.ent_coef \
        == "auto_0.1"
    assert config_from_dict({"algo": "sac", "sac": {"ent_coef": 0.2}}).sac.ent_coef == 0.2
    assert config_from_dict({"algo": "sac"}).sac.target_entropy == "auto"


def test_rules_judge_only_the_algorithms_they_are_about(tmp_path: Path):
    def built(algo: str) -> set[str]:
        config = tiny_config(tmp_path, algo=algo)
        return {hook.spec.name for hook in rule_hooks(RuleContext(config, 3, 1))}

    assert "no_learning" in built("td3") and "no_learning" not in built("sac")
    assert "entropy_collapse" in built("sac") and "entropy_collapse" not in built("ddpg")
    assert "eval_collapse" in built("sac") & built("ddpg")


def test_a_checkpoint_names_its_algorithm(trained_run):
    payload = load_checkpoint(trained_run.checkpoint_dir / "checkpoint_step_200.pt")
    assert payload["algo"] == payload["config"]["algo"] == "ddpg"
    assert "actor_target" in payload and "log_ent_coef" not in payload


@pytest.fixture
def run_copy(trained_run, tmp_path) -> Path:
    folder = tmp_path / "checkpoints" / "trained"
    shutil.copytree(trained_run.checkpoint_dir, folder)
    return folder


@pytest.mark.parametrize("command", ["resume", "eval"])
@pytest.mark.parametrize("change, message", [
    ({"algo": "ppo"}, "names algo 'ppo', which this rltrain does not train"),
    ({"algo": "td3"}, "holds a td3 agent but its config says algo 'ddpg'"),
    ({"algo": 3}, "names algo 3, which this rltrain does not train"),
])
def test_a_checkpoint_with_a_forged_algorithm_is_one_line(run_copy, command, change, message):
    path = run_copy / "checkpoint_step_200.pt"
    save_tensors(path, {**load_checkpoint(path), **change})
    before = path.read_bytes()
    result = CliRunner().invoke(cli, [command, "--checkpoint", str(path)])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert path.read_bytes() == before


def test_a_checkpoint_missing_its_algorithms_state_is_refused(run_copy):
    path = run_copy / "checkpoint_step_200.pt"
    payload = load_checkpoint(path)
    del payload["actor_target"]  # a ddpg checkpoint without the actor's target
    save_tensors(path, payload)
    result = CliRunner().invoke(cli, ["eval", "--checkpoint", str(path)])
    assert result.exit_code == 2 and "is incomplete: missing actor_target" in result.output


def test_resume_cannot_change_the_algorithm(trained_run, run_copy):
    result = CliRunner().invoke(cli, ["resume", "--checkpoint",
                                      str(run_copy / "checkpoint_step_200.pt"),
                                      "--set", "algo=sac"])
    assert result.exit_code == 2, result.output
    assert "algo" in result.output and len(result.output.strip().splitlines()) == 1


def test_the_default_config_is_unchanged_by_the_registry():
    assert TrainConfig().algo == "ddpg" and TrainConfig().td3.policy_delay == 2


def built(tmp_path: Path, algo: str, seed: int = 0):
    """The agent of a tiny `algo` config on a 3-d observation and 2-d action, and a batch."""
    import numpy as np
    import torch

    from rltrain.scripts.training.agent_setup import build_agent
    from rltrain.utils.training.replay_buffer import Batch

    low, high = np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32)
    torch.manual_seed(seed)
    agent, _ = build_agent(tiny_config(tmp_path, algo=algo, batch_size=32), 3, low, high,
                           torch.device("cpu"))
    g = torch.Generator().manual_seed(seed + 1)
    actions = torch.rand(32, 2, generator=g) * torch.tensor(high - low) + torch.tensor(low)
    batch = Batch(torch.randn(32, 3, generator=g), actions, torch.randn(32, 1, generator=g),
                  torch.randn(32, 3, generator=g), torch.zeros(32, 1))
    return agent, batch


@pytest.mark.parametrize("algo", sorted(trained_names()))
def test_every_algorithm_fills_in_the_whole_interface(tmp_path, algo):
    """What the run, the collector, the env runners and the diagnostics call, and every
    network in eval mode between updates (agents/base.py `Agent`)."""
    import numpy as np
    import torch

    from rltrain.agents.probes import gradient_probe

    agent, batch = built(tmp_path, algo)
    entry = ALGORITHMS[algo]
    for _ in range(3):
        metrics = agent.update(batch)
        assert {"critic_loss", "q_mean"} <= set(metrics) and agent.updates >= 1
        assert not any(net.training for net in agent.networks().values())
    targets = {name for name in agent.networks() if name.endswith("_target")}
    assert targets == {f"{net}_target" for net in entry.targets}
    assert set(agent.state_dict()) - set(BACKEND_KEYS) == set(entry.implementation().state_keys)
    assert agent.critic(batch.obs, batch.actions).shape[1:] == (32, 1)
    assert agent.critic.q1(batch.obs, batch.actions).shape == (32, 1)
    assert agent.act(np.zeros(3, np.float32), deterministic=False).shape == (2,)
    if not entry.adds_action_noise:  # it explores by sampling: the env runners' call
        action, log_prob = agent.actor.sample(batch.obs, torch.Generator().manual_seed(0))
        assert action.shape == (32, 2) and log_prob.shape == (32, 1)
        assert agent.drawn is not None and agent.drawn[0].shape == (2,)
    else:
        assert agent.drawn is None

    def state() -> dict:
        return {f"{name}.{k}": v.clone() for name, net in agent.networks().items()
                for k, v in net.state_dict().items()}

    before = state()
    gradient_probe(agent, batch)  # a probe changes no state, statistics included
    assert all(torch.equal(before[k], v) for k, v in state().items())
