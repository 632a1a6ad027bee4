"""The diagnosis engine: what is measured, the rules that judge it, and the report.

`rules/` holds every rule's spec and check (torch-free: the config schema imports it).
"""
