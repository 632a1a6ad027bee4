"""One run, from its config to its end: the agent the config asks for
(`agent_setup.py`), the run's state and what a checkpoint holds (`run_state.py`), the
loop and every way it ends (`trainer.py`, `outcome.py`), a new or resumed run made ready
(`resume.py`), and the process around it that notifies and waits after a pause
(`wait.py`, `run_notify.py`). The training envs are stepped by
utils/training/collector.py, or with `num_workers` by the env runners of
scripts/workers/.
"""
