"""ezpz-tui: see the allocation, launch distributed PyTorch, watch every rank."""

__version__ = "0.1.0"
