#!/bin/sh
# Runs bench:client's scale ladder on a machine with neither Node nor a network, from the bundle
# `npm run bench:bundle` made (.bench-bundle/bundle.tar.xz): unpacks Node, the runtime
# dependencies and dist/ into this repository, then runs the ladder alone with the bundled Node.
# Arguments go to the bench, e.g.:
#   scripts/bench-offline.sh --ladder-workers 0,4,8 --json ladder.json
set -eu
cd "$(dirname "$0")/.."
bundle=.bench-bundle/bundle.tar.xz
if [ ! -f "$bundle" ]; then
  echo "bench-offline: $bundle is missing: run npm run bench:bundle where npm works, then copy it here" >&2
  exit 2
fi
if [ ! -x .bench-bundle/bin/node ]; then
  if command -v xz >/dev/null 2>&1; then
    tar -xJf "$bundle"
  else
    # No xz: Python's lzma reads it.
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(".")' "$bundle"
  fi
fi
exec .bench-bundle/bin/node benchmarks/client-bench.ts --ladder-only --no-build "$@"
