#!/usr/bin/env bash
# The console's dependencies as wheels for a GPU box with Python 3.12 and no network, into tests/device/wheels
# (git-ignored; the device run carries it). Run where pip can reach an index. About 17 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mapfile -t deps < <(python3 -c "
import tomllib
d = tomllib.load(open('$ROOT/pyproject.toml', 'rb'))
print('\n'.join(d['project']['dependencies'] + d['build-system']['requires']))")
python3 -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$ROOT/tests/device/wheels" "${deps[@]}"
du -sh "$ROOT/tests/device/wheels"
