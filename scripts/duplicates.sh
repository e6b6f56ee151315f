#!/bin/sh
# `scripts/duplicates.sh [FOLDER] [duplicates options…]`: the `duplicates` tool over FOLDER (default src) of
# this checkout, leaving out the generated files (.gitattributes `linguist-generated=true`, e.g.
# src/client/api-types.ts): the tool has no exclude setting, so it reads a scratch copy without them. The copy
# is a git repository whose first commit is HEAD (or --base REV) and whose working tree is this checkout's, so
# `--change` and `--base` mean what they mean here. Paths in the answer are relative to FOLDER, as with
# `duplicates --repo FOLDER`.
set -eu
root=$(git rev-parse --show-toplevel)
folder=src
case "${1:-}" in -*|'') ;; *) folder=$1; shift ;; esac
# --base REV picks the copy's first commit, which is then its HEAD: it is not passed on.
base=HEAD
n=$#
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n - 1))
  if [ "$a" = --base ] && [ "$n" -gt 0 ]; then base=$1; shift; n=$((n - 1)); else set -- "$@" "$a"; fi
done
generated=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$generated"' EXIT
# The generated paths, one a line.
sed -n 's/^\([^#[:space:]][^[:space:]]*\)[[:space:]].*linguist-generated=true.*/\1/p' "$root/.gitattributes" > "$generated"
keep() { grep -vxF -f "$generated" || true; }
cd "$root"
# The base: the folder as committed at $base, generated files left out.
git ls-tree -r --name-only "$base" -- "$folder" | keep > "$tmp/base-files"
if [ -s "$tmp/base-files" ]; then git archive "$base" $(cat "$tmp/base-files") | tar -x -C "$tmp"; fi
git -C "$tmp" init -q
git -C "$tmp" add -A
git -C "$tmp" -c user.name=duplicates -c user.email=duplicates@localhost commit -q --allow-empty -m base
# The working tree over it: every tracked or untracked, not ignored file, as it is now; deleted ones removed.
rm -rf "${tmp:?}/$folder"
git ls-files -co --exclude-standard -- "$folder" | keep | while IFS= read -r f; do
  [ -f "$f" ] && mkdir -p "$tmp/$(dirname "$f")" && cp "$f" "$tmp/$f"
done
cd "$tmp"
duplicates --repo "$folder" "$@"
