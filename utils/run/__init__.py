"""One run around its loop: its folders, lock and status, its logs, the monitor that
evaluates, checkpoints and owns the pause, signals, notifications and the device.
"""
