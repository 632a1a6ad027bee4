"""How a run's episodes end: their lengths and endings over a window, the random
warm-up's last ones, and the current run of episodes that end terminated at one same
length. What the episode-structure rules (`time_limit_terminal`, `short_horizon`,
`short_episodes`) judge; InputChecks (inputs.py) feeds it at each episode's end."""

from __future__ import annotations

from collections import deque
from typing import Any

WARMUP_EPISODES = 5  # the random warm-up's last episodes that short_episodes compares with
MIN_EPISODES = 5  # episodes before the horizon is compared with their mean length
# Shorter episodes are not taken for time limits: a policy saturated at the action bounds
# falls at one same early step every episode (Humanoid-v5 at 12, Hopper-v5 at 6 or 21-23),
# while time limits are 50 steps (Reacher) or more.
MIN_LENGTH = 50


class EpisodeEnds:
    """How the last episodes ended: their lengths (bounded) and the current run of
    episodes that ended `terminated` at one same length."""

    def __init__(self, window: int) -> None:
        self.lengths: deque[int] = deque(maxlen=window)
        self.terminated: deque[bool] = deque(maxlen=window)
        self.warmup: deque[int] = deque(maxlen=WARMUP_EPISODES)  # random warm-up's last
        self.streak, self.streak_length = 0, 0

    def add(self, length: int, terminated: bool) -> None:
        self.lengths.append(length)
        self.terminated.append(terminated)
        if not terminated or length < MIN_LENGTH:
            self.streak = 0
        elif length == self.streak_length and self.streak:
            self.streak += 1
        else:
            self.streak, self.streak_length = 1, length

    def horizon_share(self, gamma: float) -> float | None:
        """1/(1-gamma) over the mean episode length (None: too few episodes, or gamma 1)."""
        if len(self.lengths) < MIN_EPISODES or gamma >= 1.0:
            return None
        return 1.0 / (1.0 - gamma) / (sum(self.lengths) / len(self.lengths))

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "terminated": list(self.terminated),
                "warmup": list(self.warmup), "streak": self.streak,
                "streak_length": self.streak_length}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths.clear()
        self.lengths.extend(state["lengths"])
        self.terminated.clear()  # not kept before short_episodes: taken as truncated
        self.terminated.extend(state.get("terminated", [False] * len(self.lengths)))
        self.warmup.clear()
        self.warmup.extend(state.get("warmup", []))
        self.streak, self.streak_length = state["streak"], state["streak_length"]
