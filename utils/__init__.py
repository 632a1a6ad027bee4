"""One-job parts used by the training loop: config, buffer, noise, checkpoints, logging."""
