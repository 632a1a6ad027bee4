"""Runs stopped by something outside the training: not configurable, always reported.

scripts/training/trainer.py records them when the env raises, a file cannot be written or
the Ray cluster of a run's env runners is lost.
"""

from __future__ import annotations

from rltrain.utils.diagnosis.rules.spec import RuleSpec

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
    RuleSpec(
        name='ray_cluster',
        section='none',
        group='Runs stopped from outside the training',
        fires_when='',
        hypothesis='if the Ray head (or the connection to it) is lost, then every call to '
                   'the cluster fails and the env runners are gone with it',
        check='start the cluster again and resume the checkpoint named; or resume it with '
              '--set ray_address=ADDRESS (another cluster) or ray_address=null (runners on '
              'this machine); the runners start new episodes'),
)
