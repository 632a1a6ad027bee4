"""`memory`: the process's resident memory and, on CUDA, the GPU's memory in use.

Checked every `monitor.memory_check_freq` env steps. The limits default to 90% of the
machine's RAM and of the device's memory. In a cgroup with a memory limit (a
container, a SLURM job), the limit is 90% of the lower of the RAM and the cgroup's
limit, and what counts is the larger of the process's memory and what every process
of the cgroup uses (its env workers too): the kernel ends the process at the cgroup's
limit, whatever the host has free. The device running out of memory in an update is
this rule's pause too (scripts/training/trainer.py stops the run there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rltrain.utils.cgroup import cgroup_memory
from rltrain.utils.config.fields import POSITIVE, RuleAction, opt
from rltrain.utils.diagnosis.rules.spec import RuleHook, RuleSpec

if TYPE_CHECKING:
    from rltrain.utils.hooks.findings import Finding

MIB = 1024 * 1024


@dataclass(frozen=True)
class MemoryRuleConfig:
    """The `memory` rule: resident memory of the process and, on CUDA, of the GPU."""

    threshold: float | None = opt(
        None, "process resident memory limit in MiB (null: 90% of the machine's RAM, or of "
        "its cgroup's memory limit where that is lower)", POSITIVE)
    gpu_threshold: float | None = opt(
        None, "GPU memory limit in MiB on CUDA (null: 90% of the device's memory)", POSITIVE)
    action: RuleAction = opt("pause", "warn, pause or off")


SPECS = (RuleSpec(
    name='memory',
    section='monitor',
    group='Health rules',
    fires_when='process (and GPU) memory limit',
    action='pause',
    config_class=MemoryRuleConfig,
    hypothesis='if memory leaks or the buffer is too big, then resident memory keeps growing',
    check="lower replay_buffer_size; watch status.json's memory over time",
    hint='a smaller replay_buffer_size or batch_size, fewer runs on the machine (or GPU), or '
         '--set monitor.memory.threshold=MiB (higher)'),)


class Memory(RuleHook):
    spec = SPECS[0]

    def configured(self) -> tuple[Any, str]:
        # Here, not at the top: the config schema imports this module without torch.
        import psutil
        import torch

        device = self.context.device or torch.device("cpu")
        self.device = device
        self.process: psutil.Process | None = None  # this process, found in `check`
        self.every = self.step_end_every = self.context.config.monitor.memory_check_freq
        self.gpu_mib = self.settings.gpu_threshold
        if self.gpu_mib is None and device.type == "cuda":
            self.gpu_mib = 0.9 * torch.cuda.get_device_properties(device).total_memory / MIB
        cgroup = cgroup_memory()
        self.cgroup_mib = None if cgroup is None else cgroup.limit / MIB
        ram = psutil.virtual_memory().total / MIB
        memory_mib = self.settings.threshold or 0.9 * min(ram, self.cgroup_mib or ram)
        return round(memory_mib, 1), self.settings.action

    def on_step_end(self, env_steps: int) -> list[Finding]:
        return self.check(env_steps) if env_steps % self.every == 0 else []

    def check(self, env_steps: int) -> list[Finding]:
        import psutil
        import torch

        if self.process is None or self.process.pid != os.getpid():
            self.process = psutil.Process()  # reading /proc once per process, not per check
        rss = self.process.memory_info().rss / MIB
        found = []
        cgroup = cgroup_memory() if self.cgroup_mib is not None else None
        if cgroup is not None and cgroup.used / MIB > max(rss, self.rule.threshold):
            used = cgroup.used / MIB
            found += self.fire(env_steps, round(used, 1),
                               f"memory in use by this run's cgroup {used:.0f} MiB is above "
                               f"{self.rule.threshold:.0f} MiB (the cgroup's limit: "
                               f"{cgroup.limit / MIB:.0f} MiB)")
        elif rss > self.rule.threshold:
            found += self.fire(env_steps, round(rss, 1),
                               f"process memory {rss:.0f} MiB is above "
                               f"{self.rule.threshold:.0f} MiB")
        if self.device.type == "cuda" and self.gpu_mib is not None:
            # In use by every process on the device, not only this one's reservations:
            # another job filling the GPU makes this run's next allocation fail too.
            free, total = torch.cuda.mem_get_info(self.device)
            gpu = (total - free) / MIB
            if gpu > self.gpu_mib:
                found += self.fire(env_steps, round(gpu, 1),
                                   f"GPU memory in use {gpu:.0f} MiB (all processes) is "
                                   f"above {self.gpu_mib:.0f} MiB")
        return found
