"""`rltrain sweep` chooses its config as `rltrain train` does: a per-env file (rltrain's
keys or RL Zoo's) with --env, or the shipped tuned values for --algo and --env. The
trials run here one after another in this process, with a stand-in for Tune's session,
instead of on Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.scripts.sweep.sweep_plan import plan_trials, trial_config
from rltrain.utils.config.schema import TrainConfig

from conftest import tiny_dict

pytest.importorskip("ray", reason="the [sweep] extra (Ray Tune) is part of [dev]")

SHORT = "fake_envs:FakeShortPendulum-v0"  # Pendulum with 50-step episodes
ZOO_TD3 = """\
Pendulum-v1:
  n_timesteps: 20000
  gamma: 0.98
  buffer_size: 200000
  learning_starts: 10000
  noise_type: 'normal'
  noise_std: 0.1
  learning_rate: !!float 1e-3
  policy_kwargs: "dict(net_arch=[400, 300])"
"fake_envs:FakeShortPendulum-v0":
  n_timesteps: 5000
  gamma: 0.9
  buffer_size: 5000
  learning_starts: 500
"""


class FakeTune:
    """Tune's session as a trial sees it, with no checkpoint to hand back."""

    def __init__(self) -> None:
        self.reports: list[dict] = []

    def get_checkpoint(self):
        return None

    def report(self, metrics, checkpoint=None):
        self.reports.append(metrics)


@pytest.fixture
def in_process(monkeypatch):
    """Tune's fit replaced by the plan's trials, run in this process as Tune runs each."""
    from rltrain.scripts.sweep import sweep as sweeps

    def fit(sweep_dir: Path, plan: dict, address, restore: bool) -> None:
        for trial in plan["trials"]:
            sweeps._run_trial({"config": plan["config"], "run_name": trial["run_name"],
                               "overrides": trial["overrides"], "threads": 1}, FakeTune())

    monkeypatch.setattr(sweeps, "_fit", fit)


def per_env_file(tmp_path: Path) -> Path:
    """Two envs' sections in rltrain's keys, sized for a test."""
    tiny = {k: v for k, v in tiny_dict(tmp_path, max_timesteps=200, eval_freq=100,
                                       checkpoint_freq=100).items() if k != "env_name"}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"Pendulum-v1": {**tiny, "gamma": 0.9},
                                    SHORT: {**tiny, "gamma": 0.8}}))
    return path


def sweep(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args])


def test_a_per_env_file_with_env_runs_that_envs_section(tmp_path, in_process):
    path = per_env_file(tmp_path)
    result = sweep("--config", str(path), "--env", "Pendulum-v1", "--seeds", "2",
                   "--name", "pe")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "logs" / "pe"
    trials = json.loads((folder / "summary.json").read_text())["trials"]
    assert [(t["run"], t["state"]) for t in trials] == [("pe_s3", "finished"),
                                                        ("pe_s4", "finished")]
    for run, seed in (("pe_s3", 3), ("pe_s4", 4)):
        saved = yaml.safe_load((folder / run / "config.yaml").read_text())
        assert (saved["env_name"], saved["gamma"], saved["seed"]) == ("Pendulum-v1", 0.9, seed)
    plan = yaml.safe_load((folder / "sweep.yaml").read_text())
    assert plan["config"] == str(path.resolve())


def test_a_grid_over_env_name_gives_each_trial_its_envs_section(tmp_path):
    path = tmp_path / "td3.yml"  # RL Zoo's format; the file's name gives the algo
    path.write_text(ZOO_TD3)
    trials = plan_trials(str(path), ("env_name=Pendulum-v1",),
                         (f"env_name=Pendulum-v1,{SHORT}",), 1, "z")
    configs = [trial_config(str(path), t.overrides) for t in trials]
    assert [(c.env_name, c.algo, c.gamma, c.replay_buffer_size, c.learning_starts)
            for c in configs] == [("Pendulum-v1", "td3", 0.98, 200_000, 10_000),
                                  (SHORT, "td3", 0.9, 5000, 500)]
    assert configs[0].hidden_sizes == (400, 300) and configs[0].actor_lr == 1e-3


def test_algo_and_env_without_a_file_take_the_shipped_entry():
    [trial] = plan_trials(None, ("env_name=Pendulum-v1", "algo=td3"), (), 1, "s")
    config = trial_config(None, trial.overrides)
    assert (config.algo, config.gamma, config.replay_buffer_size, config.max_timesteps) == \
        ("td3", 0.98, 200_000, 20_000)


def test_an_env_the_shipped_file_lacks_takes_the_defaults_said_once(tmp_path, in_process):
    tiny = ("learning_starts=50", "batch_size=16", "hidden_sizes=[16,16]", "eval_freq=100",
            "checkpoint_freq=100", "n_eval_episodes=1", "replay_buffer_size=1000",
            "torch_threads=1", f"log_dir={tmp_path / 'logs'}",
            f"checkpoint_dir={tmp_path / 'ck'}")
    result = sweep("--algo", "td3", "--env", SHORT, "--seeds", "2", "--name", "d",
                   "--device", "cpu", "--steps", "100", *(f"--set={item}" for item in tiny))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "no tuned td3" in line]
    assert len(notes) == 1 and SHORT in notes[0]  # as `rltrain train` says it, once
    for run in ("d_s0", "d_s1"):
        saved = yaml.safe_load((tmp_path / "logs" / "d" / run / "config.yaml").read_text())
        assert (saved["algo"], saved["gamma"]) == ("td3", TrainConfig().gamma)


def test_a_per_env_file_without_the_env_is_refused_as_train_refuses_it(tmp_path):
    path = per_env_file(tmp_path)
    args = ["--config", str(path), "--env", "MountainCarContinuous-v0"]
    swept = sweep(*args, "--name", "none")
    trained = CliRunner().invoke(cli, ["train", *args])
    assert swept.exit_code == trained.exit_code == 2
    assert swept.output == trained.output  # one line, the same
    assert "has no entry for env 'MountainCarContinuous-v0'" in swept.output
    assert len(swept.output.strip().splitlines()) == 1
    assert not (tmp_path / "logs" / "none").exists()


def test_without_config_or_env_the_sweep_says_what_it_needs(tmp_path):
    result = sweep("--name", "x", "--set", f"log_dir={tmp_path}")
    assert result.exit_code == 2
    assert "--config or --env is required (or --resume NAME)" in result.output
