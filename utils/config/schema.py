"""The training config: a tree of frozen dataclasses, each field with its help and range.

Every key has a default, and groups of options live in nested sections (`td3:`,
`monitor:`, `diagnostics:`); each field's help text is its `--help` and its line in the
config reference of the docs. Loading,
overrides and validation are in `utils/config/loader.py`; this module is the schema.

Frequencies (`*_freq`) and step counts are in env steps, not updates.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from rltrain.agents.registry import ALGORITHMS, Algorithm
from rltrain.utils.config.env import NormalizeConfig
from rltrain.utils.config.fields import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    UNIT_INTERVAL,
    Range,
    opt,
)
from rltrain.utils.diagnosis.rules.registry import config_fields
from rltrain.utils.diagnosis.rules.spec import Section

__all__ = ["Range", "opt", "TrainConfig", "NormalizeConfig"]

ALGO_NAMES = tuple(ALGORITHMS)  # the `algo` choices


Activation = Literal["relu", "tanh", "elu", "gelu"]


@dataclass(frozen=True)
class NetworkConfig:
    """One network's hidden layers: Linear -> [LayerNorm] -> activation, per width."""

    hidden_sizes: tuple[int, ...] | None = opt(
        None, "hidden layer widths (null: the top-level hidden_sizes)", AT_LEAST_ONE)
    activation: Activation = opt("relu", "relu, tanh, elu or gelu after each hidden layer")
    layer_norm: bool = opt(False, "LayerNorm after each hidden linear layer, before the "
                           "activation")


@dataclass(frozen=True)
class NetworksConfig:
    """The actor's and the critic's architecture (anything but the stock ReLU MLP trains
    through update_backend autograd)."""

    actor: NetworkConfig = opt(NetworkConfig(), "the policy network")
    critic: NetworkConfig = opt(NetworkConfig(), "the twin Q-networks")


@dataclass(frozen=True)
class MonitorConfig:
    """Health rules of the TrainingMonitor: each pauses (or warns) when training goes wrong."""

    memory_check_freq: int = opt(1000, "check memory every this many env steps", AT_LEAST_ONE)
    warn_every: int = opt(
        1000, "a rule that keeps warning is reported again only after this many env steps",
        AT_LEAST_ONE)


def with_rules(cls: type, section: Section) -> type:
    """`cls` with a field for every rule of `section` declared in utils/diagnosis/rules/ (its spec
    says the default threshold, action and help) that `cls` does not define itself."""
    own = {f.name for f in dataclasses.fields(cls)}
    return extended(cls, [f for f in config_fields(section) if f[0] not in own])


def extended(cls: type, fields: list[tuple[str, type, Any]]) -> type:
    """`cls` with `fields` added (a frozen dataclass of the same name and docs)."""
    if not fields:
        return cls
    generated = dataclasses.make_dataclass(cls.__name__, fields, bases=(cls,), frozen=True,
                                           namespace={"__doc__": cls.__doc__})
    generated.__module__ = cls.__module__
    return generated


MonitorConfig = with_rules(MonitorConfig, "monitor")  # type: ignore[misc]


@dataclass(frozen=True)
class DiagnosticsConfig:
    """Diagnostics of why an agent misbehaves: reward signal, state-action map, gradient
    flow, critic checks, inputs, behaviour snapshots. Every finding is a rule of the
    monitor's shape, `warn` by default; thresholds are calibrated (see the docs' page on
    diagnosing a run)."""

    enabled: bool = opt(True, "run the diagnostics during training")
    window_size: int = opt(100, "episodes in the reward-signal window (and in the mean "
                           "episode length short_horizon compares with)", AT_LEAST_ONE)
    n_clusters: int = opt(30, "state clusters of the state-action map", AT_LEAST_ONE)
    action_bins: int = opt(10, "bins per action dimension over the action range",
                           Range(2, None))
    heatmap_freq: int = opt(5000, "env steps between state-action heatmaps", AT_LEAST_ONE)
    heatmap_time_share: float = opt(
        0.002, "the heatmaps' pictures (PNG, TensorBoard image) take at most this share of "
        "the run's wall time: where one is due sooner, its clusters and findings are kept "
        "and its picture left out (fast envs; 1: every one drawn)", Range(0, 1,
                                                                          low_open=True))
    sample_rate_final: float = opt(
        0.1, "the (state, action) sampling rate decays from 1 to this",
        Range(0, 1, low_open=True))
    sample_decay_steps: int = opt(10_000, "env steps over which the sampling rate decays",
                                  AT_LEAST_ONE)
    max_samples: int = opt(10_000, "most recent (state, action) samples kept", AT_LEAST_ONE)
    grad_freq: int = opt(1000, "updates between per-layer gradient norm records",
                         AT_LEAST_ONE)
    exploding_gradient_min_norm: float = opt(
        5.0, "exploding_gradient also needs the norm above this (an absolute floor)",
        NON_NEGATIVE)
    trace_drop: float = opt(
        0.3, "a return falling this share of |baseline| below its moving baseline triggers "
        "a gradient trace", POSITIVE)
    keep_traces: int = opt(
        3, "newest gradient traces kept in traces/ (each a per-layer JSON and a critical "
        "snapshot of the batch and the networks); the run's first is kept too", AT_LEAST_ONE)
    q_warmup_updates: int = opt(
        10_000, "q_overestimation is checked from this many updates on (an untrained "
        "critic's Q of about 0 is above any negative return)", NON_NEGATIVE)
    snapshot_freq: int | None = opt(
        None, "record a fixed-seed evaluation video every this many env steps and on a "
        "pause (needs the [video] extra; null: off)", AT_LEAST_ONE)


DiagnosticsConfig = with_rules(DiagnosticsConfig, "diagnostics")  # type: ignore[misc]

NotifyEvent = Literal["pause", "finish", "crash", "warning"]


@dataclass(frozen=True)
class NotifyConfig:
    """Tell someone when a run pauses, finishes or crashes (docs/notify.md): a webhook,
    a command, or both. Delivery runs off the training thread and never stops training."""

    url: str | None = opt(None, "POST each selected event as JSON to this http(s) URL "
                          "(a token in it is masked wherever rltrain writes the URL)")
    command: str | None = opt(None, "run this command (split like a shell would, no shell) "
                              "with each selected event as JSON on its stdin")
    on: tuple[NotifyEvent, ...] = opt(("pause", "finish", "crash"),
                                      "the events to send: pause, finish, crash, warning")
    timeout: float = opt(5.0, "seconds one delivery may take; also the most a run's end "
                         "waits for deliveries still pending", Range(0, 60, low_open=True))
    retries: int = opt(2, "further tries after a failed delivery", Range(0, 10))
    backoff: float = opt(1.0, "seconds before the first retry, doubled before each next",
                         NON_NEGATIVE)


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs; `rltrain train --config` builds it from YAML."""

    # --- The keys every algorithm takes (the original DDPG set) ---
    env_name: str = opt("Pendulum-v1", "Gymnasium id, or 'some.module:EnvName-v0' for your own env")
    env_kwargs: dict[str, Any] = opt(
        {}, "keyword arguments of gymnasium.make for every env of the run (training, "
        "evaluation, rltrain eval), e.g. {g: 9.81} for Pendulum-v1; plain YAML values only")
    eval_env_kwargs: dict[str, Any] = opt(
        {}, "keyword arguments for the evaluation env (and rltrain eval) only, over "
        "env_kwargs, with the same spaces: `rltrain diagnose --verify` judges a change to "
        "env_kwargs (a reward weight, a time limit) with both branches evaluated on the env "
        "as the change makes it")
    seed: int = opt(0, "seeds networks, replay sampling, noise and every episode's reset",
                    NON_NEGATIVE)
    device: Literal["auto", "cpu", "cuda"] = opt("auto", "auto picks CUDA when it is available")
    max_timesteps: int = opt(200_000, "total env steps to train for", AT_LEAST_ONE)
    batch_size: int = opt(256, "transitions per update", AT_LEAST_ONE)
    replay_buffer_size: int = opt(1_000_000, "replay capacity in transitions", AT_LEAST_ONE)
    exploration_noise: float = opt(
        0.1, "std of the exploration noise, relative to each action dimension's half-range "
        "(with noise_type ou: the process's sigma; its std approaches sigma/sqrt(2 ou_theta))",
        NON_NEGATIVE)
    gamma: float = opt(0.99, "discount factor", UNIT_INTERVAL)
    tau: float = opt(0.005, "soft target update rate: target <- (1 - tau) target + tau online",
                     UNIT_INTERVAL)
    actor_lr: float = opt(3e-4, "Adam learning rate of the actor", POSITIVE)
    critic_lr: float = opt(3e-4, "Adam learning rate of the critic", POSITIVE)
    eval_freq: int = opt(5000, "evaluate the deterministic policy every this many env steps",
                         AT_LEAST_ONE)
    n_eval_episodes: int = opt(5, "episodes per evaluation", AT_LEAST_ONE)
    checkpoint_freq: int = opt(10_000, "write a periodic checkpoint every this many env steps",
                               AT_LEAST_ONE)
    patience: int = opt(10, "evaluations without a new best before early stopping",
                        AT_LEAST_ONE)
    min_reward_threshold: float | None = opt(
        None, "an episode return below this is catastrophic, checked once learning has "
        "started (null: no such rule; returns have each env's own scale)")
    safe_mode: bool = opt(True, "pause on health rules; false turns pauses into warnings")
    checkpoint_dir: str = opt("checkpoints", "checkpoints go to <checkpoint_dir>/<run_name>/")
    log_dir: str = opt("logs", "TensorBoard events and run logs go to <log_dir>/<run_name>/")

    # --- Added by rltrain ---
    run_name: str | None = opt(None, "run folder name (default: <env>_<algo>_s<seed>_<time>)")
    algo: Literal[ALGO_NAMES] = opt("ddpg", "; ".join(
        f"{a.name}: {a.summary}" for a in ALGORITHMS.values()))
    learning_starts: int = opt(
        1000, "env steps of uniformly random actions before the first update", NON_NEGATIVE)
    hidden_sizes: tuple[int, ...] = opt(
        (256, 256), "hidden layer widths of actor and critic (unless "
        "networks.<net>.hidden_sizes is set)", AT_LEAST_ONE)
    networks: NetworksConfig = opt(NetworksConfig(), "actor and critic architecture")
    library: dict[str, Any] = opt(
        {}, "a watched run's training settings as its library names them (an SB3 "
        "model's learning_rate, buffer_size, train_freq, ...): recorded, not used")
    update_backend: Literal["auto", "autograd", "fused"] = opt(
        "auto", "how the update is computed: autograd (any network), fused (hand-written "
        "gradients, DDPG, TD3, SAC, CrossQ and TQC with stock ReLU MLPs only, faster on the "
        "CPU), or auto (fused where it applies on the CPU, autograd otherwise); both give the "
        "same update")
    matmul_kernel: Literal["auto", "blas", "onednn"] = opt(
        "auto", "the fused update's matrix products: blas (torch's, MKL on x86 CPUs), "
        "onednn (also in torch, faster on some CPUs), or auto (whichever measures faster "
        "when the run starts; a resume keeps the checkpoint's); CUDA always uses torch's")
    grad_clip_norm: float | None = opt(
        None, "clip each network's gradient to this global norm (null: no clipping)", POSITIVE)
    utd_ratio: int = opt(1, "updates per env step once learning has started", AT_LEAST_ONE)
    num_envs: int = opt(
        1, "training envs stepped together through Gymnasium's vector API; more than 1 pays "
        "when the env step is expensive (utd_ratio stays per env step)", AT_LEAST_ONE)
    vector_mode: Literal["sync", "async"] = opt(
        "sync", "with num_envs > 1: sync steps the envs in turn in this process, async in "
        "one process each (for expensive steps)")
    env_step_timeout: float | None = opt(
        300.0, "seconds one env step() or reset() may take before the run stops with a "
        "checkpoint, as when the env raises (exit code 5); null: no limit. After 30 s "
        "in one call, status shows the run as stuck", POSITIVE)
    num_workers: int = opt(
        0, "env runners on Ray (0: the envs step in this process); each runner has its own "
        "num_envs envs, seed and exploration scale, and the learner keeps the replay buffer "
        "and runs the updates (needs the [workers] extra; docs/training.md)", NON_NEGATIVE)
    ray_address: str | None = opt(
        None, "with num_workers: the Ray cluster to join (e.g. 'auto' or 'ray://host:10001'; "
        "null: a local Ray started for the run)")
    worker_mode: Literal["lockstep", "async"] = opt(
        "lockstep", "with num_workers: lockstep steps the runners in a fixed order "
        "(reproducible, resumes bit for bit); async takes chunks as they come (faster, "
        "resumes correctly but not bit for bit)")
    worker_sync_every: int = opt(
        5, "with num_workers: updates between broadcasts of the actor's weights to the "
        "runners (a runner takes new weights between chunks; the lag of its policy behind "
        "the learner's slows learning at equal env steps: docs/performance.md)", AT_LEAST_ONE)
    worker_chunk_steps: int = opt(
        5, "with num_workers: vector steps a runner takes per chunk of transitions it "
        "sends (longer: less of Ray's cost per step, for fast envs; more policy lag)",
        AT_LEAST_ONE)
    worker_noise_spread: float = opt(
        2.0, "with num_workers: runner i of N explores with exploration_noise * "
        "spread ** (2 i / (N - 1) - 1), from noise / spread to noise * spread (Ape-X's "
        "spread; 1: all alike; an algorithm that samples its own policy ignores it)",
        Range(1, None))
    worker_cpus: float = opt(
        0.0, "with num_workers: CPUs Ray reserves for each runner (0: any number share a "
        "node; 1: a core each, which also spreads them over a cluster's nodes)",
        NON_NEGATIVE)
    worker_max_restarts: int = opt(
        2, "with num_workers: restarts of a runner whose process died or whose env raised, "
        "before the run pauses with a checkpoint", NON_NEGATIVE)
    worker_timeout: float = opt(
        300.0, "with num_workers: seconds the learner waits for a runner's chunk before it "
        "reports the runner and stops with a checkpoint", POSITIVE)
    noise_type: Literal["gaussian", "ou"] = opt(
        "gaussian", "exploration noise: independent gaussian, or Ornstein-Uhlenbeck")
    ou_theta: float = opt(0.15, "mean reversion rate of the OU noise", POSITIVE)
    exploration_noise_final: float | None = opt(
        None, "if set, the noise std decays linearly to this (null: constant noise)",
        NON_NEGATIVE)
    noise_decay_steps: int | None = opt(
        None, "env steps over which the noise decays (default: max_timesteps)", AT_LEAST_ONE)
    normalize: NormalizeConfig = opt(
        NormalizeConfig(), "running normalisation of observations and rewards (as "
        "Stable-Baselines3's VecNormalize), its statistics kept in checkpoints")
    log_freq: int = opt(1000, "write losses and throughput to TensorBoard every this many steps",
                        AT_LEAST_ONE)
    keep_checkpoints: int = opt(3, "newest periodic checkpoints kept (best and paused are kept)",
                                AT_LEAST_ONE)
    torch_threads: int | None = opt(
        None, "torch's CPU threads (null: 1 on the CPU for networks no wider than 512, which "
        "gain little from more and lose much on a busy machine; otherwise torch's default, "
        "one per core); several runs at once on one machine should share its cores (e.g. 1 "
        "each for 2 runs on 2 cores)", AT_LEAST_ONE)
    notify: NotifyConfig = opt(NotifyConfig(), "tell someone about pauses, ends, crashes")
    on_pause: Literal["exit", "wait"] = opt(
        "exit", "after a pause: exit (code 3), or wait in the process for `rltrain continue` "
        "or `rltrain stop` (as --wait)")
    wait_timeout: float | None = opt(
        None, "seconds a paused run waits for an instruction before it exits with code 3 "
        "(null: no limit)", POSITIVE)
    monitor: MonitorConfig = opt(MonitorConfig(), "health rules: threshold and action per rule")
    diagnostics: DiagnosticsConfig = opt(DiagnosticsConfig(),
                                         "diagnostics: why an agent misbehaves")


def algorithm_section(algorithm: Algorithm) -> type:
    """The config section of `algorithm`'s own options (`td3:`, `sac:`): its options
    dataclass with each field's help and range as the config's other keys have them."""
    fields = []
    for f in dataclasses.fields(algorithm.options):
        low, high, low_open = f.metadata["bounds"]
        valid = None if low is None and high is None else Range(low, high, low_open)
        fields.append((f.name, f.type, opt(f.default, f.metadata["help"], valid)))
    name = algorithm.name.upper() + "Config"
    cls = dataclasses.make_dataclass(name, fields, frozen=True, namespace={
        "__doc__": f"Options that only exist for `algo: {algorithm.name}`."})
    cls.__module__ = __name__
    return cls


def with_algorithms(cls: type) -> type:
    """`cls` with one section per algorithm that has options of its own (agents/registry.py),
    allowed only with that algorithm."""
    fields = []
    for algorithm in ALGORITHMS.values():
        if algorithm.section is not None:
            section = algorithm_section(algorithm)
            fields.append((algorithm.section, section, opt(
                section(), f"options of algo {algorithm.name} only; allowed only with it")))
    return extended(cls, fields)


TrainConfig = with_algorithms(TrainConfig)  # type: ignore[misc]


def evaluation_env_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The evaluation env's keyword arguments: env_kwargs, with eval_env_kwargs over them."""
    return {**config.env_kwargs, **config.eval_env_kwargs}


def training_envs(config: TrainConfig) -> int:
    """The envs whose transitions the learner takes: num_envs, in each env runner with
    num_workers."""
    return config.num_envs * max(1, config.num_workers)


def config_to_dict(config: Any) -> dict[str, Any]:
    """A plain dict (lists, not tuples) fit for YAML, JSON and `weights_only` checkpoints.

    An algorithm's own section is left out unless `algo` is that algorithm (it is refused
    otherwise).
    """

    def plain(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    data = plain(dataclasses.asdict(config))
    for algorithm in ALGORITHMS.values():
        if algorithm.section is not None and data.get("algo") != algorithm.name:
            data.pop(algorithm.section, None)
    return data


def iter_fields(section: Any, prefix: str = "") -> list[tuple[str, dataclasses.Field, Any]]:
    """Every leaf of a config (class or instance) as (dotted key, field, default value)."""
    rows: list[tuple[str, dataclasses.Field, Any]] = []
    instance = section() if isinstance(section, type) else section
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        if dataclasses.is_dataclass(value):
            rows.extend(iter_fields(value, prefix + f.name + "."))
        else:
            rows.append((prefix + f.name, f, value))
    return rows
