#!/usr/bin/env bash
# Which lines of the CUDA path the emulated device executes: builds TPBATCH_CUDA=EMU with gcov
# instrumentation in BUILD (default build-emu-cov/), runs the GPU tests and the engine's emulated
# end-to-end tests (ctest -L emu, the sanitizer copies left out), then prints line coverage per file
# of src/backend/cuda/ and kernels/ and in total (gcov; kernels/*.cu through their host-C++ rewrite,
# whose #line directives keep the .cu names). Lines no test reaches on the emulated device are
# listed in BUILD/uncovered.txt.
#   scripts/emu_coverage.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BUILD=$(realpath -m "${1:-build-emu-cov}")  # absolute: gcov runs from another folder
JOBS=${JOBS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPBATCH_CUDA=EMU -DCMAKE_CXX_FLAGS=--coverage >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target tpbatch tpbatch_gpu_tests
find "$BUILD" -name '*.gcda' -delete
(cd "$BUILD" && ctest -j "$JOBS" -L emu -E '^(emu_asan|emu_tsan|cuemu)' --output-on-failure) || true
# gcov over the CUDA library's objects; each .gcov file names its source.
out=$BUILD/gcov
rm -rf "$out" && mkdir -p "$out"
objs=$(find "$BUILD/CMakeFiles/tpbatch_cuda.dir" -name '*.gcno')
(cd "$out" && gcov -p -o "$BUILD/CMakeFiles/tpbatch_cuda.dir" $objs >/dev/null 2>&1 || true)
for d in $(find "$BUILD/CMakeFiles/tpbatch_cuda.dir" -type d); do
  (cd "$out" && gcov -p -o "$d" "$d"/*.gcno >/dev/null 2>&1 || true)
done
/usr/bin/python3 - "$out" "$REPO" "$BUILD/uncovered.txt" <<'PY'
import glob, os, sys
out, repo, unc_path = sys.argv[1:4]
files = {}
for g in glob.glob(os.path.join(out, "*.gcov")):
    lines = open(g, errors="replace").read().split("\n")
    src = lines[0].split("Source:", 1)[1].strip() if lines and "Source:" in lines[0] else ""
    src = os.path.normpath(os.path.join(repo, src)) if not os.path.isabs(src) else src
    rel = os.path.relpath(src, repo)
    if not (rel.startswith("src/backend/cuda/") or rel.startswith("kernels/")):
        continue
    hit = files.setdefault(rel, {})
    for l in lines[1:]:
        parts = l.split(":", 2)
        if len(parts) < 3:
            continue
        count, no = parts[0].strip(), parts[1].strip()
        if not no.isdigit() or count == "-":
            continue
        n = int(no)
        ran = count not in ("#####", "=====")
        hit[n] = hit.get(n, False) or ran
total = covered = 0
with open(unc_path, "w") as unc:
    for rel in sorted(files):
        h = files[rel]
        c = sum(h.values())
        total += len(h)
        covered += c
        print(f"{rel:45s} {c:5d}/{len(h):5d} lines  {100.0 * c / max(len(h), 1):5.1f}%")
        for n in sorted(k for k, v in h.items() if not v):
            unc.write(f"{rel}:{n}\n")
print(f"{'total':45s} {covered:5d}/{total:5d} lines  {100.0 * covered / max(total, 1):5.1f}%")
PY
echo "uncovered lines: $BUILD/uncovered.txt"
