"""The table of `throughput.py`: its rounds' results as ratios to SB3 (and SBX), the
diagnostics' cost between processes and inside them, and the seconds after the last
step. Medians over the rounds; per-round ratios where the two runs of a round follow
each other."""

from __future__ import annotations

import statistics


def print_table(rows: dict[str, list], rounds: int, capacity: int) -> None:
    """The ratios to SB3 (medians over the rounds) and the diagnostics' cost; `capacity`:
    the runs' replay capacity."""
    def median(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[kind])

    if "sb3" not in rows:  # `--only`: rltrain against SBX alone
        print_sbx(rows, median)
        return
    ours, theirs = median("rltrain", "steps_per_second"), median("sb3", "steps_per_second")
    bare = median("rltrain, diagnostics off", "steps_per_second")
    mem_ours, mem_theirs = median("rltrain", "peak_rss_mib"), median("sb3", "peak_rss_mib")
    print()
    print("| measure | rltrain | SB3 | ratio |")
    print("|---|---|---|---|")
    print(f"| env steps/s, learning phase (median of {rounds}) | {ours:.1f} | "
          f"{theirs:.1f} | {ours / theirs:.2f}x |")
    cpu_ours = median("rltrain", "cpu_steps_per_second")
    cpu_theirs = median("sb3", "cpu_steps_per_second")
    print(f"| env steps per CPU-second, learning phase | {cpu_ours:.1f} | {cpu_theirs:.1f} | "
          f"{cpu_ours / cpu_theirs:.2f}x |")
    if "rltrain, autograd backend" in rows:
        autograd = median("rltrain, autograd backend", "steps_per_second")
        mem_autograd = median("rltrain, autograd backend", "peak_rss_mib")
        print(f"| env steps/s, update_backend autograd | {autograd:.1f} | {theirs:.1f} | "
              f"{autograd / theirs:.2f}x |")
        print(f"| peak memory, update_backend autograd (MiB) | {mem_autograd:.0f} | "
              f"{mem_theirs:.0f} | {mem_autograd / mem_theirs:.2f} |")
    print(f"| peak memory, replay capacity {capacity:.0e} (MiB) | {mem_ours:.0f} | "
          f"{mem_theirs:.0f} | {mem_ours / mem_theirs:.2f} |")
    if "sbx" in rows:
        print_sbx(rows, median)
    print(f"\nflow-1 diagnostics on: {ours:.1f} steps/s, off: {bare:.1f} steps/s; on/off = "
          f"{ours / bare:.1%}")
    # The two runs of one round follow each other, so their ratio sees less of the
    # machine's drift than the ratio of the medians over all rounds.
    paired = [on["steps_per_second"] / off["steps_per_second"]
              for on, off in zip(rows["rltrain"], rows["rltrain, diagnostics off"], strict=True)]
    print(f"on/off per round: {', '.join(f'{ratio:.1%}' for ratio in paired)}; median "
          f"{statistics.median(paired):.1%}")
    ends = ", ".join(f"{kind} {median(kind, 'end_seconds'):.2f}" for kind in rows
                     if all("end_seconds" in r for r in rows[kind]))
    print(f"seconds from the last step to the run's end, not in the rates (medians): {ends}")
    shares = ", ".join(f"{r['diagnostics_share']:.1%}" for r in rows["rltrain"])
    print(f"time in the diagnostics' own calls, measured inside each run: median "
          f"{median('rltrain', 'diagnostics_share'):.1%} of the learning phase (rounds: "
          f"{shares}), so on/off = "
          f"{1 - median('rltrain', 'diagnostics_share'):.1%} from within the runs")


def print_sbx(rows: dict[str, list], median) -> None:
    """rltrain against SBX: the medians' ratios, and the ratio of each round's pair (the
    two runs of a round follow each other) with its median."""
    print("\n| measure | rltrain | SBX | ratio |\n|---|---|---|---|")
    for label, key in (("env steps/s, learning phase", "steps_per_second"),
                       ("env steps per CPU-second, learning phase", "cpu_steps_per_second"),
                       ("peak memory (MiB)", "peak_rss_mib")):
        mine, sbx = median("rltrain", key), median("sbx", key)
        print(f"| {label} | {mine:.1f} | {sbx:.1f} | {mine / sbx:.2f}x |")
    for label, key in (("per CPU-second", "cpu_steps_per_second"),
                       ("per wall second", "steps_per_second")):
        paired = [ours[key] / sbx[key] for ours, sbx in zip(rows["rltrain"], rows["sbx"],
                                                            strict=True)]
        print(f"rltrain/SBX {label}, per round: {', '.join(f'{r:.2f}' for r in paired)}; "
              f"median {statistics.median(paired):.2f}")
