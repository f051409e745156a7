#!/usr/bin/env bash
# Packages every crate meant for crates.io as `cargo publish` would, and builds each package
# on its own from what was packaged (the crates that depend on one another are packaged
# together, so no unpublished version is looked for on crates.io).
set -euo pipefail
cd "$(dirname "$0")/.."
crates=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p.get("publish") is None or p["publish"]:
        print("-p", p["name"])')
# shellcheck disable=SC2086
cargo package --quiet --allow-dirty $crates
echo "packaged:" $(echo "$crates" | sed 's/-p //g')
