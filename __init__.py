"""rltrain: train off-policy actor-critic agents (the algorithms of agents/registry.py) on
Gymnasium environments, stop safely, resume exactly.

The Python API (docs/api.md): `train`, `resume`, `load_policy`, `diagnose`, `verify` (an
A/B test of a change on a model factory of your own), the `Run`
and `Policy` they return, and the exceptions they raise for a user's mistake. Importing
rltrain loads neither torch nor Gymnasium; calling a function does.

The repository root is this package (see pyproject.toml): `rltrain.networks` holds the
pure PyTorch modules, `rltrain.agents` the update maths, `rltrain.utils` the one-job
parts (config, replay buffer, checkpoints, logging, ...), and `rltrain.scripts` the CLI,
the training loop and the API that wire them together.
"""

from rltrain.scripts.api import Policy, Run, diagnose, load_policy, resume, train
from rltrain.scripts.verify.verify_model import Verification, verify
from rltrain.utils.errors import (
    CheckpointError,
    ConfigError,
    EnvError,
    EnvFailure,
    OutputError,
    UserError,
)
from rltrain.utils.version import __version__

__all__ = [
    "CheckpointError", "ConfigError", "EnvError", "EnvFailure", "OutputError", "Policy", "Run",
    "UserError", "Verification", "__version__", "diagnose", "load_policy", "resume", "train",
    "verify",
]
