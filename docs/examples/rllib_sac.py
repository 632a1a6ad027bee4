"""RLlib's SAC (new API stack) on Pendulum-v1, watched by rltrain's callback.
`rltrain diagnose rllib_sac` shows what it found. Exits 0 at the end, 3 when a rule or
`rltrain pause rllib_sac` paused it (the printed lines restore the saved algorithm)."""

import argparse

from ray.rllib.algorithms.sac import SACConfig

from rltrain.integrations.rllib import rltrain_callback

# rltrain config keys for its rules and diagnostics, as in a config file
RLTRAIN = {"log_freq": 1_000, "diagnostics": {"heatmap_freq": 5_000}}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-timesteps", type=int, default=20_000)
    parser.add_argument("--learning-starts", type=int, default=1_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    # env steps trained on per env step sampled: batch_size / 4 is one update per 4 steps
    parser.add_argument("--training-intensity", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-name", default="rllib_sac")
    parser.add_argument("--log-dir", default="logs")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--no-rltrain", action="store_true", help="train without the callback")
    return parser.parse_args(argv)


def sac_config(args: argparse.Namespace) -> SACConfig:
    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=0)  # the env steps in this process, where rltrain is
        .training(train_batch_size_per_learner=args.batch_size,
                  num_steps_sampled_before_learning_starts=args.learning_starts,
                  training_intensity=args.training_intensity)
        .rl_module(model_config={"fcnet_hiddens": [args.hidden, args.hidden]})
        .reporting(min_sample_timesteps_per_iteration=100, min_time_s_per_iteration=0)
        .debugging(seed=args.seed))
    if args.no_rltrain:
        return config
    return config.callbacks(rltrain_callback(
        run_name=args.run_name, log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir,
        max_timesteps=args.total_timesteps, config=RLTRAIN))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    algo = sac_config(args).build_algo()
    steps = 0
    while steps < args.total_timesteps:
        result = algo.train()
        steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
        if "rltrain" in result and result["rltrain"]["should_stop"]:
            break  # the run is done, or paused: a checkpoint to restore is saved
    algo.stop()
    return 3 if "rltrain" in result and result["rltrain"]["state"] == "paused" else 0


if __name__ == "__main__":
    raise SystemExit(main())
