#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into one archive for a GPU machine that has none of the
# build's dependencies (docs/cuda.md, "On a GPU machine"): the CUDA parity test binaries, the two
# decode benches, the SentencePiece module, and every shared library they load except the C runtime and CUDA's own (the GPU
# machine brings its driver, cudart and cuBLAS).
# Usage: scripts/gpu_bundle.sh BUILD_DIR ARCHIVE   (ARCHIVE: a .tar.xz path)
# There: tar -xJf ARCHIVE -C DIR; LD_LIBRARY_PATH=DIR/lib:... scripts/gpu_check.sh DIR/bin OUT
set -euo pipefail
build=$1 archive=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"

# The same parity binaries gpu_check.sh finds, and the benches it runs.
mapfile -t names < <(grep -lE '#include "(tests/unit/kernels/)?emu_test_(util|device)\.h"' \
  $(find "$repo/tests/unit" -name '*_test.cc') | xargs -n1 basename | sed 's/\.cc$//' | sort)
names+=(decode_bench cuda_kernel_bench)
for name in "${names[@]}"; do
  exe=$(find "$build" -type f -name "$name" -perm -u+x -print -quit)
  if [ -z "$exe" ]; then echo "gpu_bundle: $name not built in $build" >&2; exit 1; fi
  cp "$exe" "$stage/bin/"
done
# The tokenizer's SentencePiece module is loaded at run time from beside the executable (not in ldd).
cp "$build/engine/libmcserve_sentencepiece.so" "$stage/bin/"

# Libraries outside the C runtime and the CUDA toolkit, as this machine resolves them.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)\.so'
for exe in "$stage"/bin/*; do  # the module too
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  [[ $soname =~ $skip ]] || cp -L "$path" "$stage/lib/$soname"
done

tar -cJf "$archive" -C "$stage" bin lib
echo "gpu_bundle: $(ls "$stage/bin" | wc -l) binaries, $(ls "$stage/lib" | wc -l) libraries, $(du -h "$archive" | cut -f1) in $archive"
