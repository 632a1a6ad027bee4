"""The Click CLI and the training loop: the only layer that wires the others together."""
