"""core.stages: what a graph does to the solver's answer. One module per node kind that acts
after the solver, each with `apply_stage(StageInput) -> (joints, note)` (the node registry names
the module): `swivel` (Elbow Swivel), `configurations` (Configuration Select and Find Solutions).
The checks of a baked shot are `core.shot.limits`. Stages solve only through `core.solve`'s
public names."""
