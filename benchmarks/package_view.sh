#!/usr/bin/env bash
# Makes VIEW/zoo: the checkout laid out as the installed package, for a machine where the
# project is not installed (the lent GPU machine: ../shared/gpu/README.md). pyproject.toml maps
# `zoo.layers`, `zoo.training` and `zoo.saved_models` to the checkout's top-level `layers/`,
# `training/` and `saved_models/`, so the checkout itself on PYTHONPATH has no `zoo.layers`.
# The view holds links only (nothing is copied, nothing is written in the checkout); put VIEW
# first on PYTHONPATH and set PYTHONSAFEPATH=1, so that the checkout's own `zoo/` in the
# working directory does not shadow it.
#
#   bash benchmarks/package_view.sh /tmp/zoo-view
#   PYTHONSAFEPATH=1 PYTHONPATH=/tmp/zoo-view python3 -m zoo.cli --help
set -euo pipefail
[ $# = 1 ] || { echo "usage: package_view.sh VIEW" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
view=$1
rm -rf "$view/zoo"
mkdir -p "$view/zoo"
for entry in "$root"/zoo/*; do
  ln -s "$entry" "$view/zoo/$(basename "$entry")"
done
ln -s "$root/layers" "$view/zoo/layers"
ln -s "$root/training" "$view/zoo/training"
ln -s "$root/saved_models" "$view/zoo/saved_models"
