"""Runs stopped by something outside the training: not configurable, always reported.

scripts/trainer.py records them when the env raises or a file cannot be written.
"""

from __future__ import annotations

from rltrain.utils.rules.spec import RuleSpec

SPECS = (
    RuleSpec(
        name='env_error',
        section='none',
        group='Runs stopped from outside the training',
        fires_when='',
        hypothesis="if the env's own code fails on some state or action, then its reset or step "
                   'raises there, every time that state and action recur',
        check='read logs/<run>/env_error_step_<N>.txt; once the env is fixed, rltrain resume '
              'takes the failed step again with the same actions'),
    RuleSpec(
        name='write_failure',
        section='none',
        group='Runs stopped from outside the training',
        fires_when='',
        hypothesis='if the disk is full or a folder is not writable, then saving logs or '
                   'checkpoints fails',
        check='free disk space or fix the permissions, then resume the checkpoint named'),
)
