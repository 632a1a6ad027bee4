"""Configs shipped with rltrain; `rltrain train --config NAME.yaml` finds them by name."""
