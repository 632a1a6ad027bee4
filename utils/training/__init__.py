"""The parts of a training step: envs, observation normalization, the replay buffer,
exploration noise and evaluation.
"""
