"""The parts of a training step: the training envs and the collector that steps them,
observation normalization, the replay buffer, exploration noise and evaluation.
"""
