"""The state-action map's rules: blind, chaotic and fixated clusters of states.

utils/diagnosis/measure/state_action.py clusters the sampled states and bins the policy's
actions in each cluster; it asks `verdict` for each (cluster, action dimension) with
enough samples, and the flow-1 hook hands each rule the clusters it flagged at a heatmap.
A flagged cluster is a warning where its return-to-go dropped since the last heatmap,
else an info note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltrain.utils.diagnosis.rules.spec import RuleCheck, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

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


def verdict(settings: Any, top: float, entropy: float) -> str | None:
    """The rule one cluster's actions in one dimension set off (None: none). `settings`:
    the diagnostics config; `top`: the most chosen action bin's probability; `entropy`:
    the actions' entropy over its largest possible value."""
    if top >= settings.fixated_cluster.threshold:
        return "fixated_cluster"
    if entropy >= settings.chaotic_cluster.threshold:
        return "chaotic_cluster"
    if top < settings.blind_cluster.threshold:
        return "blind_cluster"
    return None


class ClusterRule(RuleCheck):
    def check(self, env_steps: int, found: list[tuple[int, int]], dropped: list[int],
              clusters: int) -> list[Finding]:
        """`found`: the (cluster, action dimension) pairs with this rule's verdict;
        `dropped`: the clusters whose return-to-go dropped; `clusters`: how many there are."""
        if not found:
            return []
        what = self.spec.name.split("_")[0]
        bad = sorted({c for c, _ in found} & set(dropped))
        if bad:
            return self.fire(env_steps, bad,
                             f"clusters {bad} are {what} and their return-to-go dropped by "
                             f"more than {self.context.config.diagnostics.trace_drop:.0%} "
                             "since the last heatmap")
        flagged = sorted({c for c, _ in found})
        return self.fire(env_steps, flagged,
                         f"{len(flagged)} of {clusters} clusters {what} (an observation; no "
                         "outcome dropped)", observation=True)


class BlindCluster(ClusterRule):
    spec = SPECS[0]


class ChaoticCluster(ClusterRule):
    spec = SPECS[1]


class FixatedCluster(ClusterRule):
    spec = SPECS[2]


CHECKS = (BlindCluster, ChaoticCluster, FixatedCluster)
