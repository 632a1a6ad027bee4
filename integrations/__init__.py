"""Watch another library's training with rltrain's health rules and flow-1 diagnostics.

- `rltrain.integrations.sb3.RltrainCallback`: a Stable-Baselines3 callback for TD3, DDPG
  and SAC, and sb3-contrib's CrossQ and TQC (needs the `sb3` extra: `pip install
  "rltrain[sb3]"`; sb3-contrib's: `rltrain[sb3-contrib]`).
- `rltrain.integrations.rllib.rltrain_callback`: the callback class for RLlib's SAC on
  its current API stack (needs the `rllib` extra: `pip install "rltrain[rllib]"`).
- `rltrain.integrations.Watcher`: for a training loop of your own (CleanRL style), called
  after each env step, update and evaluation.

All three write the run folder rltrain's own training writes (events.jsonl, flow1.jsonl,
heatmaps, TensorBoard, status.json), so `rltrain status`, `rltrain diagnose` and
`rltrain pause` work on them; `session.py` is what they share. Importing this package
imports neither Stable-Baselines3 nor Ray.
"""

from rltrain.integrations.watcher import Watcher

__all__ = ["Watcher"]
