"""The cause first: findings linked as cause and symptom, the most likely cause leading
`rltrain diagnose` (table, --json, report.html), and no symptom's advice against its
cause's figures."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rltrain.scripts.cli import cli
from rltrain.utils.diagnosis.ranking import SETS_OFF, link, most_likely_cause
from rltrain.utils.diagnosis.report.findings import RULES, diagnose
from rltrain.utils.diagnosis.rules.registry import all_specs


def finding(rule: str, severity: str = "warning", step: int = 1000,
            suggested: dict | None = None) -> dict:
    return {"rule": rule, "severity": severity, "step": step, "first_step": step,
            "count": 1, "evidence": 1.0, "message": f"{rule} fired",
            "suggested_set": dict(suggested or {})}


def test_every_rule_named_in_the_links_exists():
    names = set(all_specs())
    for cause, symptoms in SETS_OFF.items():
        assert cause in names
        assert set(symptoms) <= names, set(symptoms) - names
        assert cause not in symptoms


def test_a_learning_rate_leads_the_explosions_and_the_stalled_actor_it_sets_off():
    found = link([finding("actor_stalled", step=500, suggested={"actor_lr": 0.001}),
                  finding("critic_loss_explosion", "pause", 900),
                  finding("value_policy_imbalance", step=700),
                  finding("learning_rate", step=1500,
                          suggested={"actor_lr": 0.001, "critic_lr": 0.001})])
    assert [f["rule"] for f in found][0] == "learning_rate"
    assert most_likely_cause(found)["rule"] == "learning_rate"
    by_rule = {f["rule"]: f for f in found}
    assert by_rule["actor_stalled"]["caused_by"] == ["learning_rate"]
    assert by_rule["critic_loss_explosion"]["caused_by"] == ["learning_rate"]
    assert by_rule["learning_rate"]["caused_by"] == []


def test_a_symptoms_change_against_its_causes_is_withdrawn():
    found = link([finding("learning_rate", suggested={"actor_lr": 0.001}),
                  finding("actor_fit", suggested={"actor_lr": 0.01})])
    fit = next(f for f in found if f["rule"] == "actor_fit")
    assert fit["suggested_set"] == {}
    assert fit["withdrawn_set"] == {"actor_lr": 0.01}
    agreeing = link([finding("learning_rate", suggested={"actor_lr": 0.001}),
                     finding("actor_stalled", suggested={"actor_lr": 0.001})])
    assert next(f for f in agreeing if f["rule"] == "actor_stalled")["suggested_set"]


def test_notes_are_never_causes_or_symptoms_and_nothing_leads_a_healthy_run():
    found = link([finding("sparse_reward", "info"), finding("fixated_cluster", "info")])
    assert most_likely_cause(found) is None
    assert all(f["caused_by"] == [] for f in found)


def test_no_rule_advises_raising_a_rate_in_its_check():
    """The check text of a rule that sees a symptom of a too-high rate must not tell the
    user to raise one (value_policy_imbalance once said 'raise actor_lr')."""
    for rule in ("value_policy_imbalance", "actor_stalled", "critic_loss_explosion"):
        assert "raise actor_lr" not in RULES[rule][1] and "raise critic_lr" not in RULES[rule][1]


def _run_folder(tmp_path: Path, events: list[dict]) -> Path:
    folder = tmp_path / "logs" / "lr_run"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("env_name: Pendulum-v1\n")
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def test_diagnose_leads_with_the_most_likely_cause_in_the_table_json_and_page(tmp_path):
    events = [
        {"env_steps": 1200, "rule": "actor_stalled", "action": "warn", "value": 1e-7,
         "message": "the actor does not follow", "suggested_set": {"actor_lr": 0.001}},
        {"env_steps": 1300, "rule": "value_policy_imbalance", "action": "warn",
         "value": 5000.0, "message": "the critic's relative gradient is 5000x"},
        {"env_steps": 2700, "rule": "learning_rate", "action": "warn",
         "value": {"actor": 0.03, "critic": 0.05}, "message": "both too high",
         "suggested_set": {"actor_lr": 0.001, "critic_lr": 0.001}}]
    folder = _run_folder(tmp_path, events)
    report = diagnose(folder)
    cause = report["most_likely_cause"]
    assert cause["rule"] == "learning_rate"
    assert cause["change"] == {"actor_lr": 0.001, "critic_lr": 0.001}
    assert cause["evidence"] == "actor 0.03; critic 0.05"
    assert set(cause["explains"]) == {"actor_stalled", "value_policy_imbalance"}
    out = CliRunner().invoke(cli, ["diagnose", "lr_run", "--log-dir", str(tmp_path / "logs")],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0
    first = out.output.splitlines()[0]
    assert first.startswith("most likely cause: learning_rate (warning at step 2700)")
    assert "change to try: --set actor_lr=0.001 --set critic_lr=0.001" in out.output
    as_json = CliRunner().invoke(cli, ["diagnose", "lr_run", "--json", "--log-dir",
                                        str(tmp_path / "logs")])
    assert json.loads(as_json.output)["most_likely_cause"]["rule"] == "learning_rate"
    page = (folder / "report.html").read_text()
    assert page.index("most likely cause: learning_rate") < page.index("<h2>Findings</h2>")


def test_a_run_with_both_rates_far_too_high_leads_with_them_and_advises_no_rise(tmp_path):
    """Pendulum DDPG at actor_lr = critic_lr = 0.05: `diagnose` leads with learning_rate
    and both rates, and no finding proposes raising a rate."""
    from rltrain.scripts.api import train

    train("pendulum_ddpg.yaml", run_name="lr05", actor_lr=0.05, critic_lr=0.05,
          max_timesteps=3000, safe_mode=False, torch_threads=1,
          log_dir=str(tmp_path / "logs"), checkpoint_dir=str(tmp_path / "ck"))
    report = diagnose(tmp_path / "logs" / "lr05")
    cause = report["most_likely_cause"]
    assert cause["rule"] == "learning_rate"
    assert set(cause["change"]) == {"actor_lr", "critic_lr"}
    for found in report["findings"]:
        for key, value in found["suggested_set"].items():
            if key.endswith("_lr"):
                assert value < 0.05, (found["rule"], key, value)
        assert "raise actor_lr" not in RULES[found["rule"]][1]


def test_a_diverging_q_network_leads_the_stalled_return_it_leaves():
    found = link([finding("exploration_schedule", step=16407,
                          suggested={"exploration_fraction": 0.32}),
                  finding("q_beyond_returns", step=2000,
                          suggested={"target_update_interval": 100})])
    assert most_likely_cause(found)["rule"] == "q_beyond_returns"
    assert {f["rule"]: f["caused_by"] for f in found}["exploration_schedule"] == [
        "q_beyond_returns"]
