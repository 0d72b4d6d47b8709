"""core.shot: the work on a whole shot, after the frames are solved one by one. Siblings use

- `bake`: a frame range solved in order (`solve_frames`, `solve_frames_batched`), then checked
  (`check_bake`: unconverged frames, joints on a limit, too fast, branch flips);
- `limits`: velocity, acceleration and jerk of a baked shot against the robot's limits
  (`Limits`, `check_limits`, `derivatives`);
- `retime`: a retimed copy of a shot that keeps within those limits (TOPP-RA);
- `export`: a shot written out (CSV, JSON, a ROS 2 bag, MuJoCo);
- `batch`: many shots from one manifest, each as its own `kinema-nodes bake` process.

Nothing here imports bpy; the Blender half is `blender/baking.py` and `blender/limits.py`.
"""
