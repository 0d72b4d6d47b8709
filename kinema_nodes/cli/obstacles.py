"""`--avoid`, `--obstacles`, `--margin` and `--srdf`: collision avoidance on the command line
(`solve` and `bake`), read into a `core.stages.collisions.Avoid`."""

from __future__ import annotations

import math

from ..core.errors import KinemaError

AVOID_CHOICES = ("self", "world", "all")
#: The margin when --avoid is given without --margin (the Solver node's default too).
DEFAULT_MARGIN_MM = 5.0


def add_avoid_arguments(parser) -> None:
    parser.add_argument("--avoid", choices=AVOID_CHOICES, default=None,
                        help="keep clear of the robot itself (self), the obstacles (world) or both (all); "
                             "default: all when --obstacles is given, else nothing")
    parser.add_argument("--obstacles", metavar="FILE.json", default=None,
                        help="obstacles in the robot's root frame: a JSON list of {\"box\": {\"size\": [x,y,z], \"pose\": "
                             "[x,y,z,qw,qx,qy,qz]}}, {\"sphere\": {\"center\": [..], \"radius\": r}}, {\"capsule\": {\"a\": [..], "
                             "\"b\": [..], \"radius\": r}}, {\"mesh\": \"file.stl\", \"pose\": [..]}, {\"ground\": true}")
    parser.add_argument("--margin", type=float, default=None, metavar="MM",
                        help=f"clearance to keep, in millimetres (default {DEFAULT_MARGIN_MM:g} with --avoid)")
    parser.add_argument("--srdf", default=None, metavar="FILE.srdf",
                        help="self-collision pairs to skip (<disable_collisions>) instead of the computed ones "
                             "(default: the .srdf beside the URDF, if any)")


def avoid_wanted(args) -> bool:
    return any(getattr(args, name, None) is not None for name in ("avoid", "obstacles", "margin", "srdf"))


def avoid_from_args(args):
    """The `Avoid` the options ask for, or None. Bad combinations and bad files: one line."""
    if not avoid_wanted(args):
        return None
    from ..core.stages.collisions import MAX_MARGIN_M, Avoid, load_obstacles

    mode = args.avoid or ("all" if args.obstacles else None)
    if mode is None:
        raise KinemaError("--margin and --srdf need --avoid self|world|all (or --obstacles FILE.json)")
    if mode in ("world", "all") and args.obstacles is None and mode == "world":
        raise KinemaError("--avoid world needs --obstacles FILE.json")
    margin_mm = DEFAULT_MARGIN_MM if args.margin is None else float(args.margin)
    if not math.isfinite(margin_mm) or not 0.0 <= margin_mm <= MAX_MARGIN_M * 1000.0:
        raise KinemaError(f"--margin must be from 0 to {MAX_MARGIN_M * 1000:g} mm, got {args.margin}")
    world = load_obstacles(args.obstacles) if (args.obstacles is not None and mode in ("world", "all")) else None
    if args.obstacles is not None and mode == "self":
        raise KinemaError("--obstacles given with --avoid self: use --avoid world or all to avoid them")
    return Avoid(self_=mode in ("self", "all"), world=world, margin_m=margin_mm / 1000.0, srdf=args.srdf)


def clearance_payload(result) -> dict:
    """The --json fields of a solve under avoidance."""
    value = result.min_clearance_m
    return {"min_clearance_m": value if value is not None and math.isfinite(value) else None,
            "colliding": [list(pair) for pair in result.colliding]}
