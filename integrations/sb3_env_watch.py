"""An SB3 model's VecEnv, watched for the failures of its envs while RltrainCallback
watches `learn()`.

SB3 tells a callback nothing when `learn()` ends in an exception: a sub-env that raised
in a DummyVecEnv, or a SubprocVecEnv worker that died with its env, left the run's
status "running" (then "stopped (killed?)") with no checkpoint and no reason. Put in
place of `model.env` for one `learn()`, `EnvWatch` passes every call through; an
exception from the envs' step or reset is handed to the callback (which pauses the run
with the model and replay buffer saved, and the reason) before it goes on up to the
caller of `learn()`, as it would have.
"""

from __future__ import annotations

from typing import Any, Callable

from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rltrain.utils.errors import first_line


class EnvWatch(VecEnvWrapper):
    def __init__(self, venv: VecEnv, failed: Callable[[str], None]) -> None:
        super().__init__(venv)
        self.failed = failed

    def reset(self) -> Any:
        try:
            return self.venv.reset()
        except Exception as exc:
            self.failed(env_failure("reset", exc))
            raise

    def step_async(self, actions: Any) -> None:
        try:
            self.venv.step_async(actions)
        except Exception as exc:
            self.failed(env_failure("step", exc))
            raise

    def step_wait(self) -> Any:
        try:
            return self.venv.step_wait()
        except Exception as exc:
            self.failed(env_failure("step", exc))
            raise


def env_failure(call: str, exc: BaseException) -> str:
    """The line that says what failed: a SubprocVecEnv whose worker died tells only of
    its lost pipe (the env's own traceback is printed by the worker)."""
    if isinstance(exc, (EOFError, BrokenPipeError, ConnectionResetError)):
        return (f"a SubprocVecEnv worker ended during {call} ({type(exc).__name__}): its "
                "env raised, or it was killed; the worker printed the env's traceback")
    return f"the env raised {type(exc).__name__} in {call}: {first_line(exc)}"
