"""core: every number of Kinema Nodes, in plain Python and NumPy. Never imports bpy, mathutils
or bmesh (tests/core/test_layout.py checks), so all of it runs and is tested without Blender.

Folders: `model` (what a robot is), `solve` (IK), `graph` (node trees as data), `stages` (what
runs after the solver), `shot` (a whole shot: bake, limits, retime, export, batch). Beside them:
`roles` and `presets` (graphs that name roles, not links), `reach`, `camera` and `demo`
(numbers the Blender side copies), `lru`, `files` (atomic writes), `errors`, `defaults`.
Each folder's `__init__` says which names its siblings may use.
"""
