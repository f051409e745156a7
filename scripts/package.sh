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
# The packaged crates are checked as if they came from a registry, which cargo unpacks once
# under its home and never again for the same version: drop those copies, so each package is
# checked against what was packaged now and not against an older package of the same version;
# and forget their builds, which cargo would take as fresh for the same reason.
for unpacked in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
  case "$unpacked" in */index.crates.io-*) continue ;; esac
  for name in $(echo "$crates" | sed 's/-p //g'); do rm -rf "$unpacked$name"-[0-9]*; done
done
rm -rf "${CARGO_TARGET_DIR:-target}"/debug/.fingerprint/hermes*
# shellcheck disable=SC2086
cargo package --quiet --allow-dirty $crates
echo "packaged:" $(echo "$crates" | sed 's/-p //g')
