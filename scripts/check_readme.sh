#!/usr/bin/env sh
# check_readme.sh - compiles and runs the C example of README.md as its
# first line says (the rpath absolute, as $PWD makes it), against the library
# in build dir $1 (default: build), from another directory.
set -eu
BUILD=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/{on=1; next} /^```$/{if(on){exit}} on' README.md > "$tmp/example.c"
cc -std=c11 -Wall -Werror "$tmp/example.c" -Iinclude -L"$BUILD" -lkfuse -Wl,-rpath,"$PWD/$BUILD" -o "$tmp/example"
(cd / && "$tmp/example") | tee "$tmp/out.txt"
grep -q "KF_ERR_SHAPE" "$tmp/out.txt"
echo "README example: compiled and ran"
