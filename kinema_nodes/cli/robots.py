"""cli.robots: `kinema-nodes robots`, every robot that a name reaches."""

from __future__ import annotations

from .common import emit


def add_arguments_robots(parser):
    """List every robot by name: bundled, example-robot-data, robosuite, robot_descriptions, mujoco-menagerie"""
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_robots(args) -> int:
    from ..core.model.example_robots import named_robots

    robots = named_robots()
    payload = {
        "robots": [{"name": r.name, "source": r.source, "format": r.format, "file": str(r.path) if r.path else None,
                    "cached": r.cached, "fetch": None if r.cached else r.fetch_hint}
                   for r in robots],
        "count": len(robots),
    }
    lines = []
    for source in dict.fromkeys(r.source for r in robots):
        group = [r for r in robots if r.source == source]
        fetched = sum(r.cached for r in group)
        lines.append(f"{source} ({len(group)}{'' if fetched == len(group) else f', {fetched} fetched'}):")
        width = max(len(r.name) for r in group)
        lines.extend(f"  {r.name:<{width}}  {r.format:<5} {_where(r)}" for r in group)
    lines.append("any of these names works wherever a URDF path does (info, fk, solve, import, bake, ...);")
    lines.append("a library's robot once that library has fetched it (Kinema Nodes never fetches)")
    emit(args, payload, lines)
    return 0


def _where(robot) -> str:
    if robot.path is not None:
        return str(robot.path)
    if robot.cached:
        return f"(in {robot.source}'s cache)"
    return f"(not fetched yet: {robot.fetch_hint})"
