"""A proposed change tested as a controlled experiment: `rltrain diagnose --verify` on an
rltrain run (`verify.py`, planned by `verify_plan.py`) and `rltrain.verify` on a model
factory of the user's (`verify_model.py`), judged by the same statistics
(`verify_stats.py`).
"""
