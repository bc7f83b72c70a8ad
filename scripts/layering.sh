#!/usr/bin/env bash
# mypy (strict) and import-linter over eaglebug as installed.
#
# Why not at the repository's root: setuptools maps three folders (eaglebug/, checks/, tui/)
# into one `eaglebug` namespace, so `eaglebug.checks` and `eaglebug.tui` exist only in the
# installed layout; run bare at the root, lint-imports stops with "Missing layer". This stages
# a plain install in a temporary folder and checks that. Used by .ci/run; run it by hand too.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage" "$repo/build"' EXIT
pip install --quiet --no-deps --target "$stage/site" "$repo"
cd "$stage/site"
echo "== mypy (strict) over the installed package layout"
mypy --config-file "$repo/pyproject.toml" --cache-dir "$stage/.mypy_cache" -p eaglebug
echo "== import-linter (the layering of docs/architecture.md) over the same installed layout"
PYTHONPATH="$stage/site" lint-imports --config "$repo/pyproject.toml"
