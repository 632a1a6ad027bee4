"""`rltrain sweep` on Ray Tune: the trials it plans (`sweep_plan.py`), their run on Tune
(`sweep.py`) and Ctrl-C pausing them with a checkpoint (`sweep_pause.py`).
"""
