"""The CLI's commands other than training: `config show` and the everyday flags
(`config_commands.py`), `status` and `pause` (`run_commands.py`), `runs`, `diagnose`,
`eval`, and `continue` and `stop` for a run that waits (`wait_commands.py`). cli.py
gathers them under the `rltrain` group beside `train`, `resume` and `sweep`.
"""
