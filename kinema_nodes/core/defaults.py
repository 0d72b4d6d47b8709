"""Numbers the user manual promises, in one place."""

#: A live solve slower than this pauses live updates ("Over budget; live updates paused").
DEFAULT_SOLVE_BUDGET_MS = 33.0
