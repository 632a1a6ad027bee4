"""The state-action map's rules; checks in utils/diagnostics/state_action.py."""

from __future__ import annotations

from rltrain.utils.rules import RuleSpec

SPECS = (
    RuleSpec(
        name='blind_cluster',
        section='diagnostics',
        group='State-action map',
        fires_when='no action bin reaches this probability',
        threshold=0.3,
        action='warn',
        hypothesis='if the state encoding misses information, then in some state clusters no '
                   'action is clearly preferred',
        check="dump the cluster's typical states (heatmaps/clusters_step_*.json); check "
              'normalisation and missing features'),
    RuleSpec(
        name='chaotic_cluster',
        section='diagnostics',
        group='State-action map',
        fires_when='normalised action entropy at least this',
        threshold=0.9,
        action='warn',
        hypothesis='if the policy has not learned a region, then its actions there are near '
                   'uniform',
        check='check exploration noise and whether the region is reachable'),
    RuleSpec(
        name='fixated_cluster',
        section='diagnostics',
        group='State-action map',
        fires_when='one action bin has at least this probability',
        threshold=0.95,
        action='warn',
        hypothesis='if the policy settled on one action in a region (often right: a '
                   'bang-bang controller does this), then that action is chosen there almost '
                   'always; it is a problem only where the return there drops while it does',
        check="look at the cluster's typical states and the chosen action; recompute the reward "
              'for the right action by hand'),
)
