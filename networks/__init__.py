"""Pure `nn.Module`s: the actor and the twin-Q critic."""
