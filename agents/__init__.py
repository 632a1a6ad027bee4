"""Update maths: one module per algorithm over one interface (base.py); registry.py lists
them."""
