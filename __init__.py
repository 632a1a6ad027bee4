"""rltrain: train DDPG/TD3 agents on Gymnasium environments, stop safely, resume exactly.

The repository root is this package (see pyproject.toml): `rltrain.networks` holds the
pure PyTorch modules, `rltrain.agents` the update maths, `rltrain.utils` the one-job
parts (config, replay buffer, checkpoints, logging, ...), and `rltrain.scripts` the CLI
and the training loop that wires them together.
"""

__version__ = "0.1.0"
