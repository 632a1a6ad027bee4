"""RLlib's PPO (new API stack) on CartPole-v1, watched by rltrain's callback.
`rltrain diagnose rllib_ppo` shows what it found. Exits 0 at the end, 3 when a rule or
`rltrain pause rllib_ppo` paused it (the printed lines restore the saved algorithm)."""

import argparse

from ray.rllib.algorithms.ppo import PPOConfig

from rltrain.integrations.rllib import rltrain_callback

# rltrain config keys for its rules and diagnostics, as in a config file
RLTRAIN = {"log_freq": 1_000, "diagnostics": {"heatmap_freq": 5_000}}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # RL Zoo's CartPole PPO (rl-baselines3-zoo, hyperparams/ppo.yml), its 8 envs' rollouts
    # of 32 steps as one env's 256
    parser.add_argument("--total-timesteps", type=int, default=50_000)
    # env steps per iteration (the rollout), and the minibatch each step trains on
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--minibatch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-name", default="rllib_ppo")
    parser.add_argument("--log-dir", default="logs")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--no-rltrain", action="store_true", help="train without the callback")
    return parser.parse_args(argv)


def ppo_config(args: argparse.Namespace) -> PPOConfig:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)  # the env steps in this process, where rltrain is
        .training(train_batch_size_per_learner=args.batch_size,
                  minibatch_size=args.minibatch_size, num_epochs=args.epochs, lr=args.lr,
                  gamma=0.98, lambda_=0.8, clip_param=0.2,
                  # RLlib clips each step's squared value error at 10 by default, which
                  # stops V learning returns of tens: rltrain's value_fit then warns
                  vf_clip_param=float("inf"))
        .rl_module(model_config={"fcnet_hiddens": [args.hidden, args.hidden]})
        .debugging(seed=args.seed))
    if args.no_rltrain:
        return config
    return config.callbacks(rltrain_callback(
        run_name=args.run_name, log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir,
        max_timesteps=args.total_timesteps, config=RLTRAIN))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    algo = ppo_config(args).build_algo()
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
