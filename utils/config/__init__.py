"""The training config: its schema (frozen dataclasses), the building blocks of its
fields, and the one loader that resolves a config from files, RL Zoo entries and overrides.
"""
