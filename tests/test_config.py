"""Config loading, overrides and every validation error."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltrain.utils.config.loader import (
    apply_overrides,
    config_from_dict,
    load_config,
    read_yaml_mapping,
    resolve_config_path,
    shipped_config_names,
)
from rltrain.utils.config.schema import TrainConfig, config_to_dict, iter_fields
from rltrain.utils.errors import ConfigError


def test_shipped_configs_load_and_resolve_by_bare_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from any working directory
    assert {"pendulum_ddpg.yaml", "pendulum_td3.yaml"} <= set(shipped_config_names())
    ddpg = load_config("pendulum_ddpg.yaml")
    td3 = load_config("pendulum_td3")
    assert (ddpg.algo, td3.algo) == ("ddpg", "td3")
    assert ddpg.env_name == "Pendulum-v1" and ddpg.replay_buffer_size == 1_000_000
    assert ddpg.actor_lr == pytest.approx(3e-4)  # YAML 1.1 leaves '3e-4' as text


def test_an_existing_path_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("pendulum_ddpg.yaml").write_text("env_name: MountainCarContinuous-v0\n")
    assert resolve_config_path("pendulum_ddpg.yaml") == Path("pendulum_ddpg.yaml")
    assert load_config("pendulum_ddpg.yaml").env_name == "MountainCarContinuous-v0"


def test_missing_config_names_the_shipped_ones():
    with pytest.raises(ConfigError, match="not found.*pendulum_ddpg.yaml"):
        resolve_config_path("no_such_config.yaml")


@pytest.mark.parametrize("raw, message", [
    ({"gama": 0.9}, "unknown config key 'gama'.*did you mean 'gamma'"),
    ({"td3": {"policy_dela": 2}, "algo": "td3"},
     "unknown config key 'td3.policy_dela'.*did you mean 'td3.policy_delay'"),
    ({"gamma": 1.5}, r"'gamma' must be a number in \(0, 1\]; got 1.5"),
    ({"gamma": 0}, r"'gamma' must be a number in \(0, 1\]"),
    ({"tau": -0.1}, r"'tau' must be a number in \(0, 1\]"),
    ({"actor_lr": 0}, "'actor_lr' must be a number > 0"),
    ({"critic_lr": -1e-3}, "'critic_lr' must be a number > 0"),
    ({"batch_size": 0}, "'batch_size' must be an integer >= 1"),
    ({"batch_size": 2.5}, "'batch_size' must be an integer"),
    ({"batch_size": "big"}, "'batch_size' must be an integer >= 1; got 'big'"),
    ({"batch_size": 512, "replay_buffer_size": 100}, "'batch_size' .512. must not exceed"),
    ({"safe_mode": "yes please"}, "'safe_mode' must be true or false"),
    ({"safe_mode": 1}, "'safe_mode' must be true or false"),
    ({"device": "tpu"}, "'device' must be one of auto, cpu, cuda"),
    ({"algo": "trpo"}, "'algo' must be one of ddpg, td3, sac"),
    ({"algo": "ppo"}, "^algo ppo is watched, not trained, by rltrain: train it with "
                      "Stable-Baselines3 and RltrainCallback"),
    ({"hidden_sizes": []}, "'hidden_sizes' must be a non-empty list"),
    ({"hidden_sizes": [64, 0]}, r"'hidden_sizes\[1\]' must be an integer >= 1"),
    ({"exploration_noise": float("nan")}, "'exploration_noise' must be a number >= 0"),
    ({"td3": {"policy_delay": 2}}, "section 'td3' applies only with algo: td3"),
    ({"td3": 5, "algo": "td3"}, "section 'td3' must be a mapping"),
    ({"learning_starts": 500, "max_timesteps": 500}, "'learning_starts' .500. must be below"),
    ({"noise_decay_steps": 100}, "'noise_decay_steps' needs exploration_noise_final"),
    ({"run_name": "../escape"}, "'run_name' must be a plain folder name"),
    ({"diagnostics": {"dead_relu": {"threshold": None}}},
     r"'diagnostics.dead_relu.threshold' must be a number > 0 \(or set diagnostics"),
    ({"monitor": {"q_explosion": {"threshold": -1}}}, "'monitor.q_explosion.threshold' must be"),
    ({"diagnostics": {"broken_gradient": {"threshold": 3}}},
     "'diagnostics.broken_gradient.threshold' cannot be set"),
    ({"monitor": {"early_stopping": {"threshold": 3}}},
     "'monitor.early_stopping.threshold' cannot be set; its threshold is the top-level key "
     "patience"),
])
def test_invalid_values_name_the_key_and_the_allowed_range(raw, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


@pytest.mark.parametrize("text, expected", [("1e6", 1_000_000), ("1000000", 1_000_000),
                                            ("1.0e6", 1_000_000), ("2.5e3", 2500)])
def test_exponents_without_a_dot_are_numbers_in_yaml(text, expected):
    raw = apply_overrides({}, (f"replay_buffer_size={text}",))  # YAML 1.1 left 1e6 as text
    assert config_from_dict(raw).replay_buffer_size == expected


@pytest.mark.parametrize("raw, shown", [
    ({"replay_buffer_size": "1e6"}, "replay_buffer_size: 1e6"),
    ({"gamma": "0.99"}, "gamma: 0.99"),
    (apply_overrides({}, ('batch_size="64"',)), "batch_size: 64"),
])
def test_a_quoted_number_is_refused_with_its_unquoted_form(raw, shown):
    with pytest.raises(ConfigError, match=f"got the text .*: write it without quotes "
                                          f"\\({shown}\\)"):
        config_from_dict(raw)


def test_integers_beyond_a_float_are_kept_exact_or_refused_in_one_line():
    assert config_from_dict({"replay_buffer_size": 2**63 - 1}).replay_buffer_size == 2**63 - 1
    with pytest.raises(ConfigError, match="'gamma' must be a number"):
        config_from_dict({"gamma": 10**400})  # math.isfinite raised OverflowError


def test_a_bare_off_is_the_rule_action_off_in_files_and_overrides(tmp_path):
    # YAML 1.1 (PyYAML) reads an unquoted `off` as false; the documented value must work.
    path = tmp_path / "c.yaml"
    path.write_text("monitor:\n  critic_loss_explosion:\n    action: off\n")
    config = load_config(str(path), ["monitor.q_explosion.action=off"])
    assert config.monitor.critic_loss_explosion.action == "off"
    assert config.monitor.q_explosion.action == "off"
    # YAML 1.1's other booleans are words here, refused by name (`no` was a silent off).
    for word in ("on", "no", "yes", "false"):
        with pytest.raises(ConfigError, match=f"must be one of warn, pause, off; got "
                                              f"{'False' if word == 'false' else repr(word)}"):
            load_config(str(path), [f"monitor.q_explosion.action={word}"])
    with pytest.raises(ConfigError, match="'safe_mode' must be true or false; got 'no'"):
        load_config(str(path), ["safe_mode=no"])
    assert load_config(str(path), ["safe_mode=False"]).safe_mode is False


def test_overrides_parse_yaml_and_reach_nested_sections(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algo: td3\nmax_timesteps: 5000\n")
    config = load_config(str(path), ["gamma=0.95", "td3.policy_delay=3", "hidden_sizes=[8, 8]",
                                     "grad_clip_norm=10", "safe_mode=false"], run_name="abc")
    assert config.gamma == 0.95 and config.td3.policy_delay == 3
    assert config.hidden_sizes == (8, 8) and config.grad_clip_norm == 10.0
    assert config.safe_mode is False and config.run_name == "abc"


@pytest.mark.parametrize("item, message", [("gamma", "expects key=value"),
                                           ("=3", "expects key=value"),
                                           ("seed.x=3", "'seed' is not a section"),
                                           ("gamma=[1, 2", "cannot parse value")])
def test_bad_overrides(item, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides({"seed": 1}, [item])


@pytest.mark.parametrize("text, message", [
    ("gamma: [1, 2\n", "not valid YAML at line"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("seed: 1\ngamma: 0.9\nseed: 2\n", "not valid YAML at line 3: key 'seed' appears twice"),
    ("td3:\n  policy_delay: 2\n  policy_delay: 3\n", "key 'policy_delay' appears twice")])
def test_bad_yaml_files(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(path))


def test_yaml_merge_keys_may_override_what_they_merge(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("td3_defaults: &d {policy_delay: 2, target_policy_noise: 0.2}\n"
                    "algo: td3\ntd3:\n  <<: *d\n  policy_delay: 3\n")
    raw = read_yaml_mapping(path)
    assert raw["td3"] == {"policy_delay": 3, "target_policy_noise": 0.2}


@pytest.mark.parametrize("raw", [{"algo": "td3", "td3": {"policy_delay": 4}, "seed": 7},
                                 {"algo": "ddpg", "hidden_sizes": [8], "grad_clip_norm": None}])
def test_config_is_frozen_and_round_trips_through_a_plain_dict(raw):
    config = config_from_dict(raw)
    with pytest.raises(AttributeError):
        config.seed = 1  # type: ignore[misc]
    assert config_from_dict(config_to_dict(config)) == config


def test_every_field_has_help_text():
    for key, f, _ in iter_fields(TrainConfig):
        assert f.metadata.get("help"), key


@pytest.mark.parametrize("key, names", [
    ("learning_rate", "'actor_lr' and 'critic_lr'"),
    ("buffer_size", "'replay_buffer_size'"),
    ("n_timesteps", "'max_timesteps'"),
    ("gradient_steps", "'utd_ratio'"),
    ("train_freq", "'utd_ratio'"),
    ("action_noise", "'exploration_noise' and 'noise_type'"),
    ("policy_noise", "'td3.target_policy_noise'"),
    ("policy_delay", "'td3.policy_delay' and 'crossq.policy_delay'"),  # by the registry
    ("top_quantiles_to_drop_per_net", "'tqc.top_quantiles_to_drop_per_net'"),
    ("start_timesteps", "'learning_starts'"),
])
def test_other_tools_names_point_at_rltrains(key, names):
    """`learning_rate` is spelled like `learning_starts`, but means the learning rates."""
    with pytest.raises(ConfigError) as caught:
        load_config("pendulum_ddpg.yaml", [f"{key}=1"])
    message = str(caught.value)
    assert message.startswith(f"unknown config key '{key}'; rltrain calls it {names}")
    assert "did you mean" not in message and "\n" not in message


def test_every_alias_names_real_keys_and_shadows_none():
    from rltrain.utils.config.aliases import ALIASES, NOTES, aliases
    keys = {key for key, _, _ in iter_fields(TrainConfig)}
    assert not set(aliases()) & {key.split(".")[0] for key in keys}
    for names in aliases().values():
        assert all(name in keys or name in {"networks"} for name in names), names
    assert set(NOTES) <= set(ALIASES)
    with pytest.raises(ConfigError, match="did you mean 'td3.policy_delay'"):
        config_from_dict({"algo": "td3", "td3": {"policy_dela": 2}})  # sections: spelling
