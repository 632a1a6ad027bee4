"""Starting Ray on this machine, as `rltrain sweep` and env runners (`num_workers`) do.

`ray.init` gives its new node 30 seconds to register (a limit written into Ray) and
raises "The current node timed out during startup" beyond that; on a loaded machine
(two cores busy with other work) Ray's processes can take longer. The start is then
tried again, a node's second start being the faster (its files are cached by then).

Without an address the start is a Ray of this process's own (address "local"): plain
`ray.init()` joins any cluster a `ray start` or another test left on the machine, and
refuses `num_cpus` there ("When connecting to an existing cluster...").
"""

from __future__ import annotations

from typing import Any

STARTUP_TIMEOUT = "timed out during startup"  # Ray's message
ATTEMPTS = 3


def init_ray(ray: Any, **kwargs: Any) -> None:
    """`ray.init(**kwargs)`, tried again after Ray's start-up timeout; no address is "local"."""
    kwargs["address"] = kwargs.get("address") or "local"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:
            if STARTUP_TIMEOUT not in str(exc) or attempt == ATTEMPTS:
                raise
            ray.shutdown()  # what the failed start left running
