"""Update maths: one module per algorithm over one interface (base.py); registry.py lists
them, families.py their families (what each kind's runs are made of)."""
