#!/usr/bin/env bash
# Builds the guide (docs/, an mdBook) into docs/book, installing mdBook from crates.io into
# /var/tmp/hermes-tools when it is missing. Its Rust code is compiled and run by the test
# suite (the doc tests of the hermes crate), not here.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=/var/tmp/hermes-tools
export PATH="$tools/bin:$PATH"
if ! command -v mdbook >/dev/null 2>&1; then
  echo "installing mdbook into $tools"
  cargo install --quiet --locked --root "$tools" mdbook@0.5.4 \
    --no-default-features --features search
fi
mdbook build docs
echo "the guide is in docs/book/index.html"
