#!/usr/bin/env bash
# Installs torch (the CPU use of PyPI's wheel) into the venv whose pip is $1, one wheel per
# pip command: torch with its CUDA libraries is ~3.5 GB of downloads, which one pip command
# would hold all at once beside what it installed (~5 GB). pip resolves the set first
# (`--dry-run --report`, from PyPI's metadata files, nothing downloaded), then each
# distribution is installed alone (`--no-deps`, pinned to the resolved version). triton is
# left out: torch imports and runs on the CPU without it (it compiles GPU kernels), and it
# is another 1 GB.
set -euo pipefail
pip=$1
python=$(dirname "$pip")/python
report=$(mktemp)
trap 'rm -f "$report"' EXIT
"$pip" install -q --dry-run --ignore-installed --report "$report" torch
"$python" - "$report" <<'EOF' | while read -r requirement; do "$pip" install -q --no-deps "$requirement"; done
import json
import sys

for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if name.lower() != "triton":
        print(f"{name}=={version}")
EOF
"$python" -c "import torch; print('torch', torch.__version__)"
