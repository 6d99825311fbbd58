#!/usr/bin/env bash
# Build the release (wheel and sdist, the wheel made from the sdist, in a build environment of
# [build-system]'s requirements kept in .cache/wheel-smoke for a day), check it (twine check, every
# data file of src/conveyor in the wheel), install the BUILT WHEEL (with its web and prometheus extras)
# into a fresh virtualenv per Python and run scripts/wheel_smoke.py there: the README's quick start on
# SQLite, `conveyor --version`, the dashboard and /metrics, `conveyor install` plus a job on PostgreSQL
# in a schema of its own.
#
#   bash scripts/wheel-smoke.sh [--dist DIR] [VERSION...]     (default versions: 3.11 3.12 3.13)
#   bash scripts/wheel-smoke.sh --build-only --dist DIR
#
# --dist DIR uses the conveyor-*.whl already built there instead of building. --build-only builds and
# checks the release into DIR and smokes no Python (tests/test_wheel.py builds once this way, then
# smokes each Python with --dist DIR in a test of its own). Each Python is found on
# PATH (python3.X) or under pyenv's versions; one that is missing is skipped, saying so (set
# WHEEL_SMOKE_REQUIRE=1 to fail instead). Virtualenvs live in .cache/wheel-smoke, one per Python and
# wheel hash: an unchanged wheel reuses its venv (the smoke itself always runs); a changed one gets a
# fresh venv, installed offline from a wheelhouse of the dependencies (downloaded from PyPI once per
# Python and dependency list).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${WHEEL_SMOKE_CACHE:-$ROOT/.cache/wheel-smoke}
DSN=${CONVEYOR_TEST_DSN:-postgresql://postgres@127.0.0.1:5432/test}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
mkdir -p "$CACHE"

BUILD_ONLY=0
if [ "${1:-}" = "--build-only" ]; then
    BUILD_ONLY=1
    shift
fi
DIST=""
if [ "${1:-}" = "--dist" ]; then
    DIST=$2
    shift 2
fi
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.11 3.12 3.13)

started=$(date +%s.%N)
if [ "$BUILD_ONLY" = 1 ] || [ -z "$DIST" ]; then
    DIST=${DIST:-$CACHE/dist}
    rm -rf "$DIST"
    echo "== build"
    # The build environment: a venv holding `build` and what pyproject.toml's [build-system] requires,
    # nothing else, made once per requirement list and day (build's own isolation made two such venvs
    # per build, pip installing hatchling into each: 7 of the build's 9 s of CPU). `--no-isolation`
    # still checks that the requirements are met there, so the build proves they are enough.
    requires=$("$PYTHON" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")')
    benv=$CACHE/build-env-$( (echo "$requires" && "$PYTHON" -V) | sha256sum | cut -c1-16)
    if [ ! -f "$benv/.complete" ] || [ -n "$(find "$benv/.complete" -mmin +1440)" ]; then
        rm -rf "$CACHE"/build-env-*
        "$PYTHON" -m venv --without-pip "$benv"
        mapfile -t wanted <<<"$requires"
        "$PYTHON" -m pip --python "$benv/bin/python" install -q --disable-pip-version-check build "${wanted[@]}" \
            >"$CACHE/build-env.log" 2>&1 || { cat "$CACHE/build-env.log"; exit 1; }
        touch "$benv/.complete"
    fi
    "$benv/bin/python" -m build --no-isolation --outdir "$DIST" . >"$CACHE/build.log" 2>&1 ||
        { cat "$CACHE/build.log"; exit 1; }
    echo "== twine check"
    "$PYTHON" -m twine check --strict "$DIST"/*
fi
WHEEL=$(ls "$DIST"/conveyor-*.whl)
# Every file of the package that is not Python (SQL, templates, assets, py.typed) is in the wheel.
"$PYTHON" - "$WHEEL" <<'EOF'
import sys, zipfile
from pathlib import Path

src = Path("src/conveyor")
wanted = {f"conveyor/{p.relative_to(src)}" for p in src.rglob("*")
          if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".py", ".pyc")}
missing = sorted(wanted - set(zipfile.ZipFile(sys.argv[1]).namelist()))
if missing:
    sys.exit(f"the wheel lacks {len(missing)} data files: {', '.join(missing[:10])}")
print(f"ok   the wheel holds all {len(wanted)} data files of src/conveyor")
EOF
[ "$BUILD_ONLY" = 0 ] || exit 0
# The extras the smoke uses: the dashboard (web) and the metrics endpoint (prometheus).
EXTRAS="[web,prometheus]"
# The venvs' key: the wheel and the extras; the wheelhouses': the wheel's dependency list (its
# METADATA's Requires-Dist lines) and the extras.
HASH=$( (sha256sum <"$WHEEL" && echo "$EXTRAS") | sha256sum | cut -c1-16)
REQUIRES=$( (unzip -p "$WHEEL" '*.dist-info/METADATA' | grep '^Requires-Dist' && echo "$EXTRAS") | sha256sum | cut -c1-16)

find_python() {
    local version=$1 candidate
    local pyenv_root
    pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for candidate in "$pyenv_root"/versions/"$version".*/bin/python"$version" "$(command -v "python$version" || true)"; do
        # A pyenv shim may exist and fail: the candidate must run and be that version.
        if [ -n "$candidate" ] && [ -x "$candidate" ] &&
            "$candidate" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$version')" \
                >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - $1" | bc)"; }

# One Python's smoke, start to end; its last line says ok, SKIP or FAIL (exit status 0, 0, 1).
smoke_one() {
    local version=$1 t0 interpreter house venv work
    t0=$(date +%s.%N)
    if ! interpreter=$(find_python "$version"); then
        echo "SKIP python $version: not found (python$version on PATH, or under $(pyenv root 2>/dev/null || echo ~/.pyenv)/versions)"
        [ "${WHEEL_SMOKE_REQUIRE:-0}" != 1 ]
        return
    fi
    # The dependencies, downloaded from PyPI once per Python and dependency list into a wheelhouse;
    # the venv itself is new for each wheel and installs offline from there.
    house=$CACHE/wheels-$version-$REQUIRES
    if [ ! -f "$house/.complete" ]; then
        rm -rf "$CACHE"/wheels-"$version"-*
        "$interpreter" -m pip download -q --disable-pip-version-check --cache-dir "$CACHE/pip" \
            --dest "$house" "$WHEEL$EXTRAS" 2>&1 | grep -v '^WARNING: Location' || true
        rm -f "$house"/conveyor-*.whl # the wheel under test is named explicitly at install
        touch "$house/.complete"
    fi
    venv=$CACHE/venv-$version-$HASH
    if [ ! -f "$venv/.installed" ]; then
        rm -rf "$CACHE"/venv-"$version"-*
        "$interpreter" -m venv --without-pip "$venv"
        "$PYTHON" -m pip --python "$venv/bin/python" install -q --disable-pip-version-check --no-index \
            --no-compile --find-links "$house" "$WHEEL$EXTRAS" 2>&1 | grep -v '^WARNING: Location' || true
        if ! "$venv/bin/python" -c 'import conveyor'; then
            echo "FAIL python $version: the wheel did not install"
            return 1
        fi
        touch "$venv/.installed"
        echo "ok   fresh venv with the wheel: $(elapsed "$t0") s"
    fi
    work=$(mktemp -d)
    if (cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/python" "$ROOT/scripts/wheel_smoke.py" "$ROOT/README.md" "$DSN"); then
        echo "ok   python $version ($("$venv/bin/python" -V 2>&1)): $(elapsed "$t0") s"
    else
        echo "FAIL python $version"
        rm -rf "$work"
        return 1
    fi
    rm -rf "$work"
}

# The Pythons run side by side (most of a smoke is waiting: pip, a node's poll, PostgreSQL).
pids=()
for version in "${VERSIONS[@]}"; do
    smoke_one "$version" >"$CACHE/log-$version" 2>&1 &
    pids+=($!)
done
failed=()
summary=()
for i in "${!VERSIONS[@]}"; do
    version=${VERSIONS[$i]}
    wait "${pids[$i]}" || failed+=("$version")
    echo "== python $version"
    cat "$CACHE/log-$version"
    summary+=("$(tail -n 1 "$CACHE/log-$version")")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
echo "total $(elapsed "$started") s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
