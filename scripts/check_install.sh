#!/usr/bin/env sh
# check_install.sh - installs a CPU-only build into a temporary prefix, then
# builds and runs the README's C example against the installed copy twice:
# through pkg-config (kfuse.pc) and through CMake's find_package(kfuse), both
# from / so that nothing of the source tree is on their paths. Two layouts: a
# two-level LIBDIR (lib/x86_64-linux-gnu, Debian's), and an absolute LIBDIR
# with the header in a subdirectory (include/kfuse), as some distributions'
# builds pass them.
#   usage: scripts/check_install.sh
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/{on=1; next} /^```$/{if(on){exit}} on' "$src/README.md" > "$tmp/example.c"

check_layout() { # name, LIBDIR (relative to the prefix, or absolute), INCLUDEDIR
    name=$1
    prefix=$tmp/prefix-$name
    case $2 in /*) libdir=$2 ;; *) libdir=$prefix/$2 ;; esac
    cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DKF_GPU=OFF -DKF_BUILD_TOOLS=OFF \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR="$2" \
        -DCMAKE_INSTALL_INCLUDEDIR="$3" > "$tmp/configure.log"
    cmake --build "$tmp/build" -j "$(nproc)" > "$tmp/build.log"
    cmake --install "$tmp/build" > "$tmp/install.log"
    test -f "$prefix/$3/kfuse.h"

    # pkg-config
    flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs kfuse)
    cc -std=c11 -Wall -Werror "$tmp/example.c" $flags -Wl,-rpath,"$libdir" -o "$tmp/ex_pc"
    (cd / && "$tmp/ex_pc") > "$tmp/out_pc.txt"
    grep -q "KF_ERR_SHAPE" "$tmp/out_pc.txt"
    echo "$name: installed copy through pkg-config: compiled and ran"

    # CMake find_package
    rm -rf "$tmp/consumer"
    mkdir "$tmp/consumer"
    cp "$tmp/example.c" "$tmp/consumer/"
    cat > "$tmp/consumer/CMakeLists.txt" <<'CML'
cmake_minimum_required(VERSION 3.18)
project(consumer LANGUAGES C)
find_package(kfuse 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE kfuse::kfuse)
CML
    cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -Dkfuse_DIR="$libdir/cmake/kfuse" > "$tmp/consumer.log"
    cmake --build "$tmp/consumer/build" > "$tmp/consumer_build.log"
    (cd / && LD_LIBRARY_PATH="$libdir" "$tmp/consumer/build/example") > "$tmp/out_cmake.txt"
    grep -q "KF_ERR_SHAPE" "$tmp/out_cmake.txt"
    echo "$name: installed copy through find_package(kfuse): compiled and ran"
}

check_layout debian lib/x86_64-linux-gnu include
check_layout absolute "$tmp/prefix-absolute/lib64" include/kfuse
