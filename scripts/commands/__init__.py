"""The CLI's commands beside `train`, `resume` and `sweep` (which cli.py holds): `config
show` and the everyday flags (`config_commands.py`), `status` and `pause`
(`run_commands.py`), `runs` (`runs_command.py`), `diagnose` (`diagnose_command.py`),
`eval` (`eval_command.py`), and `continue` and `stop` for a run that waits
(`wait_commands.py`). cli.py gathers them under the `rltrain` group.
"""
