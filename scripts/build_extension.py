"""Build the installable Blender extension zips: one per platform and Blender line.

    python scripts/build_extension.py [--platform NAME ...] [--line LINE ...] [--dist DIR]

Users install an extension from a zip and never run pip, so the solver's dependencies travel
inside it as wheels, downloaded from PyPI unmodified (``pip download --only-binary=:all:
--no-deps`` for the platform's tags and the line's Python). Blender installs the wheels that
match the running platform and Python, deduplicating same-named wheels newest-first, so the
two Blender lines (which differ in Python and numpy) get separate zips:

    line 4.5   Blender 4.5 - 5.0   Python 3.11, numpy 1.26  -> jax/jaxlib 0.7.1, ml_dtypes<0.6
    line 5.1   Blender 5.1 and up  Python 3.13, numpy 2     -> the newest jax

numpy is never bundled (Blender ships it, and a second numpy would break Blender's own).

What goes in: the closure of `ROOTS` under each wheel's own ``Requires-Dist`` (markers
evaluated for the platform and Python), minus what Blender ships (`BLENDER_PROVIDES`) and what
is left out on purpose with a reason (`LEFT_OUT`). Every bundled distribution needs a line in
`WHY`; one that turns up without it stops the build, so the zips never grow silently.

Where a platform has no wheel of a solver dependency (jaxlib publishes none for Intel macOS),
the zip carries only the core's wheels and the add-on uses its NumPy solver there; the summary
says so.

Downloads are cached in ``~/.cache/kinema_nodes/wheels/<line>/<platform>`` (or
``$KINEMA_WHEEL_CACHE``). Each zip is built by Blender's own ``blender_ext.py build`` and then
checked with ``blender_ext.py validate``; both ship inside the ``bpy`` wheel, which must be
installed in the Python running this script.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
except ImportError:  # pip always has a copy
    from pip._vendor.packaging.markers import default_environment
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kinema_nodes"


@dataclass(frozen=True)
class Line:
    """A range of Blender releases that embed the same Python and numpy."""

    name: str
    python: str
    blender_min: str
    blender_max: str | None  # exclusive, as the manifest means it
    pins: dict[str, str] = field(default_factory=dict)  # distribution -> version specifier

    @property
    def label(self) -> str:
        return f"Blender {self.blender_min[:3]}-5.0" if self.blender_max else f"Blender {self.blender_min[:3]}+"

    @property
    def slug(self) -> str:
        return "blender4.5-5.0" if self.blender_max else f"blender{self.blender_min[:3]}-up"


LINES = {
    "4.5": Line("4.5", "3.11", "4.5.0", "5.1.0", {"jax": "==0.7.1", "jaxlib": "==0.7.1", "ml-dtypes": "<0.6", "scipy": "<1.18"}),
    "5.1": Line("5.1", "3.13", "5.1.0", None, {}),
}

#: Blender's platform names -> wheel platform tags pip may pick, best first. Linux: Blender needs
#: glibc 2.28. macOS: Blender 4.5/5.x need macOS 11.2 or later; wheels built for macOS 12 are
#: accepted too because scipy publishes none older for Apple silicon.
PLATFORMS = {
    "linux-x64": [f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)] + ["manylinux2014_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_12_0_arm64", "macosx_11_0_arm64", "macosx_11_0_universal2", "macosx_10_9_universal2"],
    "macos-x64": [f"macosx_{v}_x86_64" for v in ("12_0", "11_0", "10_15", "10_14", "10_13", "10_12", "10_9")]
    + ["macosx_10_9_universal2"],
}
#: For the markers in each wheel's Requires-Dist.
MARKER_PLATFORM = {
    "linux-x64": ("linux", "Linux", "x86_64"),
    "windows-x64": ("win32", "Windows", "AMD64"),
    "macos-arm64": ("darwin", "Darwin", "arm64"),
    "macos-x64": ("darwin", "Darwin", "x86_64"),
}

#: What we need directly. "core": the URDF reader and mesh loader (the add-on cannot import a
#: robot without them) and SciPy (convex hulls: the robot's collision model, an obstacle's
#: Convex Pieces and its fitted shapes); SciPy is a root of its own because jax is the only
#: other thing that brings it, and jax has no Intel-macOS wheels (SciPy has, for both lines).
#: "solver": the PyRoki solver, optional at run time (NumPy fallback).
ROOTS = {
    "core": ["yourdfpy", "lxml", "trimesh", "pycollada", "scipy"],
    "solver": ["jax", "jaxlib", "ml-dtypes", "almond-pyroki", "almond-jaxls", "jaxlie", "flatbuffers"],
    # The compiled IK kernel (core/solve/_kernel_maths.py, built by _kernel.py); optional at run time (plain NumPy form).
    # Intel macOS gets numba 0.62.1, the last release with wheels there.
    "kernel": ["numba"],
    # Robots from more formats (issue 16), imported only for such files: .xacro (the ROS xacro,
    # pure Python, with PyYAML for its yaml loading) and MJCF (.xml, through MuJoCo's compiler).
    # Two groups, so a platform without MuJoCo wheels (Intel macOS) still reads xacro.
    "xacro": ["xacro", "pyyaml"],
    "mjcf": ["mujoco"],
}

#: Why each bundled distribution is there. The closure of ROOTS is computed from the wheels'
#: own Requires-Dist; a distribution that turns up without an entry here stops the build, so
#: the zip never grows silently.
WHY: dict[str, str] = {
    "yourdfpy": "core.robot reads URDFs with it",
    "lxml": "yourdfpy parses XML with it; core.robot checks the XML with it first",
    "six": "yourdfpy",
    "trimesh": "core.meshes loads meshes with it; also yourdfpy, pyroki, viser",
    "pycollada": "trimesh loads .dae meshes through it (example-robot-data's visuals are .dae)",
    "python-dateutil": "pycollada",
    "tzdata": "python-dateutil 4",
    "numba": "the compiled IK kernel of the NumPy solver, Elbow Swivel and Find Solutions",
    "xacro": "core.model.xacro expands .xacro robots with it (the ROS implementation)",
    "pyyaml": "xacro (load_yaml in xacro files)",
    "mujoco": "core.model.mjcf compiles MJCF robots with MuJoCo's own compiler",
    "mujoco-core": "mujoco's compiled library and bindings",
    "llvmlite": "numba's compiler",
    "jax": "the solver's array library",
    "jaxlib": "jax's compiled runtime (the largest wheel by far)",
    "ml-dtypes": "jax, jaxlib",
    "opt-einsum": "jax",
    "scipy": "convex hulls for collisions (the collision model, Convex Pieces, fitted obstacle shapes); jax, jaxlib; jaxls imports it at import time",
    "flatbuffers": "jax.export, to keep compiled solvers on disk",
    "almond-pyroki": "PyRoki, the IK solver (the published fork that installs `pyroki`)",
    "almond-jaxls": "jaxls, PyRoki's least-squares solver",
    "jaxlie": "Lie groups for pyroki and jaxls",
    "jax-dataclasses": "pyroki, jaxls, jaxlie",
    "jaxtyping": "pyroki, jaxls",
    "wadler-lindig": "jaxtyping",
    "typing-extensions": "jaxlie, jaxls, viser",
    "loguru": "pyroki and jaxls log with it",
    "termcolor": "jaxls",
    "rich": "jaxls, viser",
    "markdown-it-py": "rich",
    "mdurl": "markdown-it-py",
    "pygments": "rich",
    "tqdm": "jaxls, viser",
    "viser": "`import pyroki` imports pyroki.viewer, which imports viser",
    "msgspec": "viser (imported at import time)",
    "websockets": "viser (imported at import time)",
    "colorama": "loguru, tqdm (Windows only)",
    "win32-setctime": "loguru (Windows only)",
}

#: Shipped inside Blender's own Python: never bundle (a second numpy would break Blender).
BLENDER_PROVIDES = {"numpy", "requests", "zstandard", "cython", "certifi", "charset-normalizer", "idna", "urllib3"}

#: Declared requirements we leave out on purpose, and why it is safe.
LEFT_OUT = {
    "robot-descriptions": "almond-pyroki: only its examples load robots from it; `import pyroki` does not (it pulls git and many robot repos)",
    "tyro": "almond-pyroki, jaxlie: command-line parsing for their examples; never imported by `import pyroki`, jaxls or jaxlie",
    "pyliblzfse": "almond-pyroki: has no wheels at all (sdist only); not imported by `import pyroki`",
    "imageio": "viser: imported lazily for image messages, which the solver never sends (it pulls pillow, ~10 MB)",
    "pillow": "imageio: see imageio",
    "mujoco-studio": "mujoco: its viewer application; `import mujoco` never imports it (only names it in an error text)",
    "glfw": "mujoco: its OpenGL renderer, imported inside try/except by `import mujoco`; Kinema only compiles models",
    "pyopengl": "mujoco: see glfw (~30 MB unpacked)",
}



def log(message: str) -> None:
    print(message, flush=True)


def wheel_cache(line: Line, platform: str) -> Path:
    base = Path(os.environ.get("KINEMA_WHEEL_CACHE") or Path.home() / ".cache" / "kinema_nodes" / "wheels")
    folder = base / line.name / platform
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on a cache folder (POSIX; elsewhere no lock)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class DownloadError(RuntimeError):
    pass


def download(requirements: list[str], line: Line, platform: str) -> list[Path]:
    """pip download, no dependencies, binary only, for this platform and Python. Returns the
    wheel files pip chose (new or already in the cache)."""
    dest = wheel_cache(line, platform)
    abi = "cp" + line.python.replace(".", "")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
        "--python-version", line.python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
        "--progress-bar", "off", "--disable-pip-version-check",
    ]
    for tag in PLATFORMS[platform]:
        command += ["--platform", tag]
    command += requirements
    with _locked(dest):  # two test workers may build at once; pip must not write a wheel twice
        result = subprocess.run(command, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [ln for ln in result.stderr.splitlines() if ln.startswith("ERROR") and "Ignored the following" not in ln]
        raise DownloadError("; ".join(errors) or result.stderr.strip()[-500:])
    chosen = []
    for match in re.finditer(r"(?:Saved|File was already downloaded) (\S+\.whl)", result.stdout):
        path = Path(match.group(1))
        chosen.append(path if path.is_absolute() else dest / path.name)
    names = {canonicalize_name(p.name.split("-")[0]) for p in chosen}
    missing = [r for r in requirements if canonicalize_name(Requirement(r).name) not in names]
    if missing:
        raise DownloadError(f"pip reported no wheel for {', '.join(missing)} (output format changed?)")
    return sorted(set(chosen))


def requirement_for(name: str, line: Line) -> str:
    return name + line.pins.get(name, "")


def wheel_requirements(wheel: Path, line: Line, platform: str) -> list[Requirement]:
    """What a wheel requires on this platform and Python (markers evaluated, extras off)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(metadata_name).decode("utf-8", "replace")
    sys_platform, platform_system, machine = MARKER_PLATFORM[platform]
    environment = default_environment()
    environment.update(
        python_version=line.python, python_full_version=line.python + ".0", sys_platform=sys_platform,
        platform_system=platform_system, platform_machine=machine, implementation_name="cpython",
        platform_python_implementation="CPython", os_name="nt" if sys_platform == "win32" else "posix", extra="",
    )
    needed = []
    for header in re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.MULTILINE):
        requirement = Requirement(header.strip())
        if requirement.marker is None or requirement.marker.evaluate(environment):
            needed.append(requirement)
    return needed


def distribution_of(wheel: Path) -> str:
    return canonicalize_name(wheel.name.split("-")[0])


@dataclass
class Build:
    line: Line
    platform: str
    wheels: list[Path]
    solver: bool
    note: str = ""
    pulled_in_by: dict[str, list[str]] = field(default_factory=dict)
    zip_path: Path | None = None
    validation: str = ""


def closure(roots: list[str], line: Line, platform: str, have: dict[str, Path], pulled_in_by: dict[str, set[str]]) -> dict[str, Path]:
    """Download `roots` and everything they require (minus Blender's and LEFT_OUT), adding to
    `have` (distribution -> wheel). Each distribution's version range is the line's pin joined
    with every requirer's range; pip picks the newest wheel in it for the platform."""
    specs = {canonicalize_name(n): SpecifierSet(line.pins.get(canonicalize_name(n), "")) for n in roots}
    have = dict(have)
    for name, wheel in have.items():  # what an earlier closure brought still counts
        for requirement in wheel_requirements(wheel, line, platform):
            needed = canonicalize_name(requirement.name)
            if needed in specs:
                specs[needed] &= requirement.specifier
    for _ in range(20):
        pending = [n for n in specs if n not in have or not specs[n].contains(version_of(have[n]), prereleases=True)]
        if not pending:
            return have
        for wheel in download([n + str(specs[n]) for n in pending], line, platform):
            have[distribution_of(wheel)] = wheel
        for owner in pending:
            for requirement in wheel_requirements(have[owner], line, platform):
                name = canonicalize_name(requirement.name)
                pulled_in_by.setdefault(name, set()).add(owner)
                if name in BLENDER_PROVIDES or name in LEFT_OUT:
                    continue
                specs[name] = specs.get(name, SpecifierSet(line.pins.get(name, ""))) & requirement.specifier
        for owner, wheel in have.items():  # ranges of wheels downloaded in an earlier round
            for requirement in wheel_requirements(wheel, line, platform):
                name = canonicalize_name(requirement.name)
                if name in specs:
                    specs[name] &= requirement.specifier
    raise DownloadError(f"the requirements of {', '.join(roots)} do not settle on one set of versions for {platform}")


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def gather_wheels(line: Line, platform: str) -> Build:
    pulled_in_by: dict[str, set[str]] = {}
    core = closure(ROOTS["core"], line, platform, {}, pulled_in_by)
    everything, note = core, ""
    solver_pulled = {name: set(owners) for name, owners in pulled_in_by.items()}
    try:
        everything = closure(ROOTS["solver"], line, platform, core, solver_pulled)
        pulled_in_by = solver_pulled
    except DownloadError as exc:
        note = f"no solver: {exc}"
        log(f"  ! {platform} / {line.label}: solver wheels unavailable, core only (NumPy solver): {exc}")
    has_solver = everything is not core
    kernel_pulled = {name: set(owners) for name, owners in pulled_in_by.items()}
    try:
        everything = closure(ROOTS["kernel"], line, platform, everything, kernel_pulled)
        pulled_in_by = kernel_pulled
    except DownloadError as exc:
        note = (note + "; " if note else "") + f"no compiled kernel: {exc}"
        log(f"  ! {platform} / {line.label}: numba wheels unavailable, the kernel runs as plain NumPy: {exc}")
    for group, words in (("xacro", "xacro"), ("mjcf", "MJCF")):
        formats_pulled = {name: set(owners) for name, owners in pulled_in_by.items()}
        try:
            everything = closure(ROOTS[group], line, platform, everything, formats_pulled)
            pulled_in_by = formats_pulled
        except DownloadError as exc:
            note = (note + "; " if note else "") + f"no {words} import: {exc}"
            log(f"  ! {platform} / {line.label}: {', '.join(ROOTS[group])} wheels unavailable, {words} import says what it needs: {exc}")
    undocumented = sorted(set(everything) - set(WHY))
    if undocumented:
        raise SystemExit(
            f"build stopped: {', '.join(undocumented)} would be bundled (pulled in by "
            + "; ".join(f"{n}: {', '.join(sorted(pulled_in_by.get(n, ())))}" for n in undocumented)
            + "); add each to WHY, or to LEFT_OUT with the reason it is safe to leave out"
        )
    build = Build(line, platform, sorted(everything.values()), has_solver, note)
    build.pulled_in_by = {name: sorted(owners) for name, owners in pulled_in_by.items()}
    return build


def manifest_for(build: Build, wheel_names: list[str]) -> str:
    """The package's manifest with this zip's Blender range, platform and wheels."""
    text = (PACKAGE / "blender_manifest.toml").read_text()
    kept = [ln for ln in text.splitlines() if not re.match(r"\s*(blender_version_min|blender_version_max|platforms|wheels)\s*=", ln)]
    block = [f'blender_version_min = "{build.line.blender_min}"']
    if build.line.blender_max:
        block.append(f'blender_version_max = "{build.line.blender_max}"')
    block.append(f'platforms = ["{build.platform}"]')
    block.append("wheels = [")
    block += [f'  "./wheels/{name}",' for name in wheel_names]
    block.append("]")
    first_table = next((i for i, ln in enumerate(kept) if ln.startswith("[")), len(kept))
    lines = kept[:first_table] + block + [""] + kept[first_table:]
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip() + "\n"
    tomllib.loads(result)  # fail here, not in Blender, if the edit broke the TOML
    return result


def blender_ext() -> Path:
    """Blender's extension tool, from the bpy wheel (found without importing bpy)."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.origin:
        raise SystemExit(f"build_extension: the bpy module is not installed in this Python ({sys.executable}); it carries "
                         "Blender's extension builder and validator. Run the script with the Python of the project's "
                         "virtual environment: .venv/bin/python scripts/build_extension.py")
    found = sorted(Path(spec.origin).parent.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise SystemExit(f"blender_ext.py not found under {Path(spec.origin).parent}")
    return found[-1]


def run_blender_ext(*args: str) -> str:
    result = subprocess.run([sys.executable, str(blender_ext()), *args], check=False, capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        raise SystemExit(f"blender_ext.py {args[0]} failed: {output}")
    return output


def zip_name(build: Build, version: str) -> str:
    return f"kinema_nodes-{version}-{build.line.slug}-{build.platform}.zip"


def build_zip(build: Build, dist: Path) -> None:
    manifest_text = (PACKAGE / "blender_manifest.toml").read_text()
    version = tomllib.loads(manifest_text)["version"]
    with tempfile.TemporaryDirectory(prefix="kinema_ext_") as tmp:
        stage = Path(tmp) / "kinema_nodes"
        shutil.copytree(PACKAGE, stage, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*"))
        (stage / "wheels").mkdir()
        names = []
        for wheel in build.wheels:
            shutil.copy2(wheel, stage / "wheels" / wheel.name)
            names.append(wheel.name)
        (stage / "blender_manifest.toml").write_text(manifest_for(build, sorted(names)))
        dist.mkdir(parents=True, exist_ok=True)
        target = dist / zip_name(build, version)
        target.unlink(missing_ok=True)
        run_blender_ext("build", "--source-dir", str(stage), "--output-filepath", str(target))
    build.zip_path = target
    build.validation = run_blender_ext("validate", str(target))


def build_all(platforms: list[str], lines: list[str], dist: Path) -> list[Build]:
    builds = []
    for line_name in lines:
        line = LINES[line_name]
        for platform in platforms:
            log(f"{line.label} (Python {line.python}) / {platform}: downloading wheels")
            build = gather_wheels(line, platform)
            build_zip(build, dist)
            log(f"  {build.zip_path} {build.zip_path.stat().st_size / 1e6:.1f} MB; validate: {build.validation}")
            builds.append(build)
    return builds


def summary(builds: list[Build]) -> dict:
    """What was built, for docs/EXTENSION.md and for tests."""
    rows = []
    for build in builds:
        rows.append({
            "zip": str(build.zip_path),
            "line": build.line.name,
            "blender": build.line.label,
            "python": build.line.python,
            "platform": build.platform,
            "solver": build.solver,
            "note": build.note,
            "bytes": build.zip_path.stat().st_size,
            "validation": build.validation,
            "wheels": {w.name: w.stat().st_size for w in build.wheels},
            "pulled_in_by": dict(sorted(build.pulled_in_by.items())),
        })
    return {"builds": rows}


def current_line() -> str:
    """The Blender line whose Python this interpreter matches."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for line in LINES.values():
        if line.python == version:
            return line.name
    raise SystemExit(f"no Blender line embeds Python {version} (lines: {', '.join(f'{n}: {ln.python}' for n, ln in LINES.items())})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", action="append", choices=sorted(PLATFORMS), help="platform to build for (repeatable; default: all)")
    parser.add_argument("--line", action="append", choices=sorted(LINES), help="Blender line (repeatable; default: all; 'current' is not a choice, see --current-line)")
    parser.add_argument("--current-line", action="store_true", help="only the line whose Python runs this script")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default: dist/)")
    parser.add_argument("--summary", type=Path, help="also write a JSON summary here")
    args = parser.parse_args(argv)
    platforms = args.platform or list(PLATFORMS)
    lines = [current_line()] if args.current_line else (args.line or list(LINES))
    blender_ext()  # Blender's builder comes with bpy: refuse now, before any download, when it is missing
    try:
        builds = build_all(platforms, lines, args.dist)
    except DownloadError as exc:
        print(f"build_extension: could not download wheels from PyPI: {exc}", file=sys.stderr)
        return 1
    data = summary(builds)
    if args.summary:
        args.summary.write_text(json.dumps(data, indent=1))
    log("")
    log("| zip | Blender | platform | solver | size |")
    log("|---|---|---|---|---|")
    for row in data["builds"]:
        log(f"| {Path(row['zip']).name} | {row['blender']} | {row['platform']} | {'PyRoki' if row['solver'] else 'NumPy only'} | {row['bytes'] / 1e6:.1f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
