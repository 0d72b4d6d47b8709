#!/usr/bin/env bash
# The other legs of the test matrix (the default leg, Python 3.11 + bpy 5.0.1, is .ci/run's own).
#
#   bash .ci/matrix.sh [py313|bpy45 ...]     (default: both)
#
#   py313  Blender 5.1+ line: Python 3.13 (through pyenv), the newest bpy for cp313, numpy 2,
#          the newest jax. Installs ".[test]" exactly as the README says, then runs the suite
#          minus tests marked slow.
#   bpy45  The oldest supported line: Python 3.11 with bpy 4.5.x (numpy 1.26, jax 0.7.1), the
#          Blender-side test files only: those that use the `blender`/`blender_session`
#          fixtures or import bpy (in-process or in a subprocess script), minus their PyRoki
#          variants (-k "not pyroki or extension").
#
# Extra pytest arguments per leg: KINEMA_MATRIX_PY313_ARGS, KINEMA_MATRIX_BPY45_ARGS.
#
# Each leg gets a fresh virtual environment under build/matrix/<leg> (build/ is git-ignored).
# A leg whose packages cannot be installed for its Python fails with a line saying so; a leg
# whose interpreter is absent is skipped with a line saying so (CI machines without pyenv's
# 3.13 cannot run the 5.1+ line). The script exits non-zero if any leg that ran failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BPY45_VERSION=${KINEMA_BPY45_VERSION:-4.5.15}
legs=("$@")
[ ${#legs[@]} -eq 0 ] && legs=(py313 bpy45)
failed=()

say() { printf '[matrix] %s\n' "$*"; }

# Requirements of the [test] extra with bpy replaced by $1 (read from pyproject.toml, so this
# script never drifts from it). Printed one per line, for `pip install -r /dev/stdin`.
test_requirements_with_bpy() {
    "$2" - "$1" <<'PY'
import re, sys, tomllib
bpy = sys.argv[1]
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for requirement in extras["test"]:
    if re.match(r"\s*bpy\b", requirement):
        continue
    print(requirement.replace("kinema-nodes[", "-e .["))
print(bpy)
PY
}

blender_side_tests() {
    # Test files that run real Blender: they use the bpy fixtures or import bpy in a subprocess.
    grep -rl -E "\bblender(_session)?\b|import bpy" tests --include="test_*.py" | sort
}

make_venv() {  # make_venv <leg> <python>
    local venv="$ROOT/build/matrix/$1"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$2" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    echo "$venv"
}

run_leg() {
    local leg=$1 start=$SECONDS venv python
    case $leg in
    py313)
        python=$(PYENV_VERSION=3.13.0 pyenv which python 2>/dev/null || command -v python3.13 || true)
        if [ -z "$python" ] || ! "$python" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
            say "py313: SKIPPED: no Python 3.13 interpreter here (pyenv 3.13.0 or python3.13)"
            return 0
        fi
        venv=$(make_venv py313 "$python") || { say "py313: FAILED: could not create a venv with $python"; return 1; }
        say "py313: installing .[test] on $("$venv/bin/python" -V)"
        if ! "$venv/bin/pip" install -q -e ".[test]"; then
            say "py313: FAILED: '.[test]' does not install on Python 3.13 (see pip's error above)"
            return 1
        fi
        "$venv/bin/python" -c 'import bpy, numpy, jax; print("[matrix] py313: bpy", bpy.app.version_string, "numpy", numpy.__version__, "jax", jax.__version__)' \
            || { say "py313: FAILED: bpy/numpy/jax do not import together"; return 1; }
        say "py313: running the suite (not slow)"
        "$venv/bin/python" -m pytest -q -n 2 -m "not slow" -p no:cacheprovider -rfE --durations=10 ${KINEMA_MATRIX_PY313_ARGS:-}
        ;;
    bpy45)
        python=$(command -v python3.11 || true)
        if [ -z "$python" ]; then
            say "bpy45: SKIPPED: no Python 3.11 interpreter here"
            return 0
        fi
        venv=$(make_venv bpy45 "$python") || { say "bpy45: FAILED: could not create a venv with $python"; return 1; }
        say "bpy45: installing the test requirements with bpy==$BPY45_VERSION on $("$venv/bin/python" -V)"
        if ! test_requirements_with_bpy "bpy==$BPY45_VERSION" "$venv/bin/python" | "$venv/bin/pip" install -q -r /dev/stdin; then
            say "bpy45: FAILED: bpy==$BPY45_VERSION with the test requirements does not install on Python 3.11"
            return 1
        fi
        "$venv/bin/python" -c 'import bpy, numpy; print("[matrix] bpy45: bpy", bpy.app.version_string, "numpy", numpy.__version__)' \
            || { say "bpy45: FAILED: bpy does not import"; return 1; }
        mapfile -t files < <(blender_side_tests)
        say "bpy45: running the Blender-side test files: ${files[*]}"
        # The PyRoki variants of Blender-side tests re-check the solver, which the default leg
        # covers on the same Python and jax; here only the Blender API matters (the extension
        # install test, which solves with the bundled PyRoki, stays).
        "$venv/bin/python" -m pytest -q -n 2 -m "not slow" -p no:cacheprovider -rfE --durations=10 \
            -k "not pyroki or extension" ${KINEMA_MATRIX_BPY45_ARGS:-} "${files[@]}"
        ;;
    *)
        say "unknown leg '$leg' (legs: py313 bpy45)"
        return 2
        ;;
    esac
    local status=$?
    # pytest exits 5 when it collected nothing: that is a broken leg, not a pass.
    say "$leg: exit $status after $((SECONDS - start)) s"
    return $status
}

for leg in "${legs[@]}"; do
    run_leg "$leg" || failed+=("$leg")
done
if [ ${#failed[@]} -gt 0 ]; then
    say "FAILED legs: ${failed[*]}"
    exit 1
fi
say "all legs passed: ${legs[*]}"
