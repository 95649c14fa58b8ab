#!/usr/bin/env sh
# check_install.sh - installs a CPU-only build into a temporary prefix with a
# two-level LIBDIR (lib/x86_64-linux-gnu, Debian's), then builds and runs the
# README's C example against the installed copy twice: through pkg-config
# (kfuse.pc) and through CMake's find_package(kfuse). Both run from / so that
# nothing of the source tree is on their paths.
#   usage: scripts/check_install.sh
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
libdir=lib/x86_64-linux-gnu
cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DKF_GPU=OFF -DKF_BUILD_TOOLS=OFF \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR="$libdir" > "$tmp/configure.log"
cmake --build "$tmp/build" -j "$(nproc)" > "$tmp/build.log"
cmake --install "$tmp/build" > "$tmp/install.log"
awk '/^```c$/{on=1; next} /^```$/{if(on){exit}} on' "$src/README.md" > "$tmp/example.c"

# pkg-config
flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs kfuse)
cc -std=c11 -Wall -Werror "$tmp/example.c" $flags -Wl,-rpath,"$prefix/$libdir" -o "$tmp/ex_pc"
(cd / && "$tmp/ex_pc") > "$tmp/out_pc.txt"
grep -q "KF_ERR_SHAPE" "$tmp/out_pc.txt"
echo "installed copy through pkg-config: compiled and ran"

# CMake find_package
mkdir "$tmp/consumer"
cp "$tmp/example.c" "$tmp/consumer/"
cat > "$tmp/consumer/CMakeLists.txt" <<'CML'
cmake_minimum_required(VERSION 3.18)
project(consumer LANGUAGES C)
find_package(kfuse 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE kfuse::kfuse)
CML
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/consumer.log"
cmake --build "$tmp/consumer/build" > "$tmp/consumer_build.log"
(cd / && LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/consumer/build/example") > "$tmp/out_cmake.txt"
grep -q "KF_ERR_SHAPE" "$tmp/out_cmake.txt"
echo "installed copy through find_package(kfuse): compiled and ran"
