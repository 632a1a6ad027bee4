"""One resolution of a config (utils/config/resolve.py): the CLI (`rltrain config show`,
which `rltrain train` shares), the Python API (`rltrain.train`) and the sweep's trials
give the same config for the same inputs, and the same error for the same mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import rltrain
from rltrain.scripts.cli import cli
from rltrain.scripts.sweep.sweep_plan import trial_config
from rltrain.utils.config.resolve import override_strings
from rltrain.utils.config.schema import config_to_dict


class Resolved(Exception):
    """Raised in place of training, carrying the config the API resolved."""


@pytest.fixture
def api_config(monkeypatch):
    def capture(config: Any, *args: Any, **kwargs: Any) -> None:
        raise Resolved(config)

    monkeypatch.setattr("rltrain.scripts.training.resume.prepare_train", capture)

    def resolve(config: Any, **keywords: Any) -> dict:
        with pytest.raises(Resolved) as caught:
            rltrain.train(config, **keywords)
        return config_to_dict(caught.value.args[0])
    return resolve


def cli_config(config: str | None, sets: tuple[str, ...]) -> dict:
    args = ["config", "show", *(["--config", config] if config else [])]
    for item in sets:
        args += ["--set", item]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)  # the note on defaults goes to stderr


def zoo_file(tmp_path: Path) -> str:
    path = tmp_path / "td3.yml"  # RL Zoo's name: the algorithm is the file's
    path.write_text("Pendulum-v1:\n  n_timesteps: 5000\n  learning_rate: !!float 7e-4\n"
                    "  noise_type: normal\n  noise_std: 0.2\n"
                    "  policy_kwargs: \"dict(net_arch=[64, 64])\"\n"
                    "MountainCarContinuous-v0:\n  n_timesteps: 9000\n  noise_type: "
                    "ornstein-uhlenbeck\n")
    return str(path)


CASES = {
    "shipped file and sets": ("pendulum_td3.yaml", {"seed": 3, "gamma": 0.98}),
    "shipped per-env entry": (None, {"algo": "sac", "env_name": "Pendulum-v1",
                                     "max_timesteps": 700}),
    "nested section": ("pendulum_td3.yaml", {"td3": {"policy_delay": 3},
                                             "monitor": {"q_explosion": {"action": "warn"}}}),
    "RL Zoo file": ("ZOO", {"env_name": "Pendulum-v1", "seed": 2}),
    "env without an entry": (None, {"algo": "td3", "env_name": "InvertedPendulum-v5"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cli_the_api_and_the_sweep_agree(case, tmp_path, api_config):
    config, keywords = CASES[case]
    config = zoo_file(tmp_path) if config == "ZOO" else config
    sets = override_strings(keywords)
    from_cli = cli_config(config, sets)
    from_api = api_config(config, **keywords)
    from_sweep = config_to_dict(trial_config(config, list(sets)))
    assert from_cli == from_api == from_sweep
    for key, value in keywords.items():
        if not isinstance(value, dict):
            assert from_cli[key] == value


def test_dotted_and_nested_keywords_are_the_same(api_config):
    nested = api_config("pendulum_td3.yaml", td3={"policy_delay": 4})
    dotted = api_config("pendulum_td3.yaml", **{"td3.policy_delay": 4})
    assert nested == dotted and nested["td3"]["policy_delay"] == 4


def test_an_rl_zoo_file_is_read_alike_with_its_keys_translated(tmp_path, api_config):
    resolved = api_config(zoo_file(tmp_path), env_name="MountainCarContinuous-v0")
    assert resolved["algo"] == "td3" and resolved["max_timesteps"] == 9000
    assert resolved["noise_type"] == "ou"


@pytest.mark.parametrize("keywords, message", [
    ({"gama": 0.9}, "unknown config key 'gama'; did you mean 'gamma'?"),
    ({"algo": "sac", "exploration_noise": 0.3},
     "config key 'exploration_noise' sets action noise, which algo sac does not add"),
])
def test_a_mistake_is_the_same_error_everywhere(keywords, message, api_config):
    sets = override_strings(keywords)
    shown = CliRunner().invoke(cli, ["config", "show", "--config", "pendulum_ddpg.yaml",
                                     *[a for s in sets for a in ("--set", s)]])
    assert shown.exit_code == 2 and message in shown.output
    with pytest.raises(rltrain.ConfigError) as api:
        api_config("pendulum_ddpg.yaml", **keywords)
    with pytest.raises(rltrain.ConfigError) as sweep:
        trial_config("pendulum_ddpg.yaml", list(sets))
    assert message in str(api.value) and str(api.value) == str(sweep.value)


def test_the_shipped_entry_is_chosen_by_the_value_as_set_reads_it(api_config):
    """A --set with a comment or quotes picks the same entry as the plain value."""
    plain = cli_config(None, ("algo=td3", "env_name=MountainCarContinuous-v0"))
    commented = cli_config(None, ("algo='td3' # x", "env_name=MountainCarContinuous-v0  # c"))
    assert commented == plain and plain["noise_type"] == "ou"  # td3.yaml's entry
