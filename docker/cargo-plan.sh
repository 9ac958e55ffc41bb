#!/bin/sh
# The Dockerfile's dependency-caching step (what cargo-chef does, by hand): from the build context
# in SRC, write into OUT
#   skeleton/  the root manifest, Cargo.lock, every member's Cargo.toml and a stub for every target
#              (lib, bin, test, bench): enough for cargo to build all third-party crates;
#   source/    the root manifest, Cargo.lock and every member directory, and nothing else, so that
#              docs/, docker/ or README edits do not rebuild cairn.
# Docker's layer cache compares what is copied by content, so the dependency layer is rebuilt only
# when a manifest or the lock file changes. Members and targets come from `cargo metadata`: a new
# crate or bench needs no change here.
set -eu
src=$1
out=$2
cd "$src"
meta=$(cargo metadata --offline --no-deps --format-version 1)
mkdir -p "$out/skeleton" "$out/source"
cp Cargo.toml Cargo.lock "$out/skeleton/"
cp Cargo.toml Cargo.lock "$out/source/"

# Paths in the metadata are absolute and contain no double quotes, so grep can cut them out.
field() { printf '%s\n' "$meta" | grep -o "\"$1\":\"[^\"]*\"" | cut -d'"' -f4; }

field manifest_path | while read -r manifest; do
    dir=$(dirname "$manifest")
    rel=${dir#"$src"/}
    [ "$rel" != "$dir" ] || continue # the root itself
    mkdir -p "$out/skeleton/$rel" "$out/source/$(dirname "$rel")"
    cp "$manifest" "$out/skeleton/$rel/"
    cp -R "$dir" "$out/source/$rel"
done

field src_path | while read -r target; do
    rel=$(realpath -m "$target")
    rel=${rel#"$src"/}
    mkdir -p "$out/skeleton/$(dirname "$rel")"
    printf '%s\n' '#![allow(dead_code)]' 'fn main() {}' >"$out/skeleton/$rel"
done
