"""Which of a network's settings lie far from what off-policy control usually uses: what
the rules that see a network fail at its job (it cannot fit, it cannot follow) name as
the change to try, read from the run's own config.

Each function returns the config keys and values to propose (empty: nothing is far off),
with a few words on why, so a finding proposes only what the run's figures say.
"""

from __future__ import annotations

from typing import Any

from rltrain.agents.registry import algorithm, section_of
from rltrain.utils.diagnosis.rules._weights import USUAL_LR

MAX_WIDTH = 1024  # `wider` proposes no layer wider than this
MIN_WIDTH = 32  # narrower hidden layers are far under the usual 64-400 units
USUAL_WIDTHS = [256, 256]
MIN_CLIP = 0.1  # a gradient norm clipped under this leaves updates far smaller than Adam's
USUAL_CLIP = 1.0
MAX_DELAY = 10  # actor updates rarer than every this many critic updates (TD3 uses 2)
USUAL_DELAY = 2


def algorithm_option(config: Any, name: str) -> Any:
    """An option of the run's algorithm (its own config section), None where it has none."""
    return getattr(section_of(config), name, None)


def option_key(config: Any, name: str) -> str:
    """The dotted key of an option of the run's algorithm (`td3.policy_delay`)."""
    return f"{algorithm(config.algo).section}.{name}"


def widths(config: Any, net: str) -> tuple[tuple[int, ...], str]:
    """The hidden widths of `net` ("actor" or "critic") and the key that sets them."""
    own = config.networks.actor if net == "actor" else config.networks.critic
    if own.hidden_sizes is not None:
        return tuple(own.hidden_sizes), f"networks.{net}.hidden_sizes"
    return tuple(config.hidden_sizes), "hidden_sizes"


def far_off(config: Any, net: str) -> tuple[dict[str, Any], list[str]]:
    """The settings of `net` far from the usual: too narrow layers, a learning rate
    under the usual range, a gradient clipped to almost nothing (and, for the actor, an
    update far rarer than the critic's)."""
    proposed: dict[str, Any] = {}
    why: list[str] = []
    sizes, key = widths(config, net)
    if max(sizes) < MIN_WIDTH:
        proposed[key] = list(USUAL_WIDTHS)
        why.append(f"its hidden layers {list(sizes)} are far narrower than the usual 64-400 "
                   "units")
    lr = getattr(config, f"{net}_lr")
    if lr < USUAL_LR[0] / 10:
        proposed[f"{net}_lr"] = USUAL_LR[0]
        why.append(f"{net}_lr {lr:g} is far under the usual {USUAL_LR[0]:g}..{USUAL_LR[1]:g}")
    clip = config.grad_clip_norm
    if clip is not None and clip < MIN_CLIP:
        proposed["grad_clip_norm"] = USUAL_CLIP
        why.append(f"grad_clip_norm {clip:g} cuts every gradient to almost nothing")
    delay = algorithm_option(config, "policy_delay")
    if net == "actor" and delay is not None and delay > MAX_DELAY:
        proposed[option_key(config, "policy_delay")] = USUAL_DELAY
        why.append(f"the actor is updated once per {delay} critic updates")
    return proposed, why


def wider(config: Any, net: str) -> tuple[dict[str, Any], list[str]]:
    """Twice the hidden widths of `net` alone (its own key), up to MAX_WIDTH and never
    narrower than now, for a network whose widths are usual but that fits what it is
    trained on worse than a plain regression does; nothing where none would grow."""
    sizes, _ = widths(config, net)
    grown = [max(size, min(2 * size, MAX_WIDTH)) for size in sizes]
    if grown == list(sizes):
        return {}, []
    return {f"networks.{net}.hidden_sizes": grown}, [
        f"its hidden layers {list(sizes)} fit less of its targets than a plain regression "
        "does: give it more units"]
