#!/usr/bin/env bash
# Builds peer_bench against the prebuilt llama.cpp in npm node-llama-cpp@3.21.1 and
# prints the path of the binary on stdout (everything else goes to stderr).
#
# Idempotent: the npm install, the extracted headers and the binary are reused when
# present and current. Needs gcc, git, node and npm (registry access) only.
#
# Environment:
#   EMBER_CACHE            cache root (default $HOME/.cache/ember)
#   EMBER_LLAMACPP_DIR     where this script installs and builds (default $EMBER_CACHE/llamacpp)
#   EMBER_LLAMACPP_NPM_DIR an existing folder holding node_modules/node-llama-cpp@3.21.1
#                          (e.g. /work/llamaref) to use instead of installing one
set -euo pipefail

readonly NLC_VERSION=3.21.1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly here
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly work_dir="${EMBER_LLAMACPP_DIR:-$cache_root/llamacpp}"
npm_dir="${EMBER_LLAMACPP_NPM_DIR:-$work_dir/npm}"

log() { echo "setup.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

for tool in gcc git node npm; do
    command -v "$tool" >/dev/null || fail "'$tool' is not on PATH"
done

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64)  platform=linux-x64 ;;
    Linux-aarch64) platform=linux-arm64 ;;
    *) fail "no prebuilt node-llama-cpp package known for $(uname -s)-$(uname -m)" ;;
esac

installed_version() {
    node -e 'try { console.log(require(process.argv[1]).version) } catch (e) { console.log("") }' \
        "$npm_dir/node_modules/$1/package.json"
}

# 1. npm packages: node-llama-cpp (for the header bundle and refgen.mjs) and the one
#    prebuilt-binaries package for this platform. The other optional packages (CUDA,
#    Vulkan, other OSes) are ~600 MB that the CPU benchmark never uses, and install
#    scripts are skipped because they only probe GPUs or offer to compile from source.
if [[ "$(installed_version node-llama-cpp)" != "$NLC_VERSION" ||
      "$(installed_version "@node-llama-cpp/$platform")" != "$NLC_VERSION" ]]; then
    [[ -n "${EMBER_LLAMACPP_NPM_DIR:-}" ]] &&
        fail "EMBER_LLAMACPP_NPM_DIR=$npm_dir lacks node-llama-cpp@$NLC_VERSION and @node-llama-cpp/$platform@$NLC_VERSION"
    log "installing node-llama-cpp@$NLC_VERSION into $npm_dir"
    mkdir -p "$npm_dir"
    (
        cd "$npm_dir"
        [[ -f package.json ]] || npm init -y >/dev/null
        npm install --save-exact --ignore-scripts --omit=optional --no-audit --no-fund \
            "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/$platform@$NLC_VERSION" >&2
    )
fi

lib_dir="$npm_dir/node_modules/@node-llama-cpp/$platform/bins/$platform"
libllama="$(find "$lib_dir" -maxdepth 1 -name 'libllama.*so' 2>/dev/null | head -n1 || true)"
libggml="$(find "$lib_dir" -maxdepth 1 -name 'libggml.*so' 2>/dev/null | head -n1 || true)"
[[ -f "$libllama" && -f "$libggml" && -f "$lib_dir/libggml-base.so" ]] ||
    fail "prebuilt llama.cpp libraries not found under $lib_dir"

# 2. Headers of exactly the release those libraries were built from.
bundle="$npm_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle"
include_dir="$work_dir/include"
stamp="$include_dir/.from-node-llama-cpp-$NLC_VERSION"
if [[ ! -f "$stamp" ]]; then
    [[ -f "$bundle" ]] || fail "header bundle missing: $bundle"
    log "extracting llama.cpp headers from $bundle"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    git clone --quiet "$bundle" "$tmp/llama.cpp" 2>/dev/null ||
        fail "git clone of $bundle failed"
    rm -rf "$include_dir"
    mkdir -p "$include_dir"
    cp "$tmp/llama.cpp/include/"*.h "$tmp/llama.cpp/ggml/include/"*.h "$include_dir/"
    touch "$stamp"
fi

# 3. peer_bench, rebuilt whenever its source or the libraries changed.
bin_dir="$work_dir/bin"
binary="$bin_dir/peer_bench"
source="$here/peer_bench.c"
if [[ ! -x "$binary" || "$source" -nt "$binary" || "$libllama" -nt "$binary" || "$stamp" -nt "$binary" ]]; then
    log "compiling $binary"
    mkdir -p "$bin_dir"
    gcc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
        -I"$include_dir" -DPEER_BACKEND_DIR="\"$lib_dir\"" \
        -o "$binary.tmp" "$source" \
        "$libllama" "$libggml" "$lib_dir/libggml-base.so" \
        -Wl,-rpath,"$lib_dir"
    mv "$binary.tmp" "$binary"
fi

echo "$binary"
