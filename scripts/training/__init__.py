"""One run, from its config to its end: the agent the config asks for
(`agent_setup.py`), the run's state and what a checkpoint holds (`run_state.py`), the
loop and every way it ends (`trainer.py`, `outcome.py`), a new or resumed run made ready
(`resume.py`), and the process around it that notifies and waits after a pause
(`wait.py`, `run_notify.py`). The training envs themselves are
utils/training/collector.py's, or scripts/workers/' with `num_workers`.
"""
