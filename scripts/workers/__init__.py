"""`num_workers`: the training envs on Ray env runners feeding one learner
(`distributed.py`, the collector's interface; `env_runner.py`, one runner), their part of
checkpoints (`worker_checkpoint.py`), their faults (`worker_faults.py`), their pace
(`worker_stats.py`) and Ray's local start (`ray_start.py`). Nothing below scripts/ knows
of Ray.
"""
