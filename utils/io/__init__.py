"""Reading and writing a run's files safely: YAML without code, atomic checkpoints with
`weights_only` loads, and the schema every checkpoint field is checked against.
"""
