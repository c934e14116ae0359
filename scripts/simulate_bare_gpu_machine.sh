#!/usr/bin/env bash
# Runs a command on this machine as if it were a bare GPU machine (docs/cuda.md "GPU check"):
# the system's MPI, HDF5, yaml-cpp, OpenBLAS, ICU, PCRE2, GTest, nlohmann-json and CLI11 are gone,
# and NCCL exists only in the pip-wheel layout (.../site-packages/nvidia/nccl/{include/nccl.h,
# lib/libnccl.so.2}, no libnccl.so link). Rehearsal of scripts/gpu_check.sh:
#   bash scripts/gpu_fetch_debs.sh build-debs && bash scripts/simulate_bare_gpu_machine.sh bash scripts/gpu_check.sh
#
# How: in a private mount namespace (unshare -m, root), an overlay is mounted over /usr (and /etc,
# and the Python site-packages folder when it lies outside /usr) whose upper layer, on a tmpfs,
# holds a whiteout (a 0/0 character device) for every file `dpkg -L` lists for the hidden packages,
# for the alternatives links that point at them, and for NCCL's files under the CUDA prefix. The
# NCCL library is then bind-mounted into the pip-wheel layout. Nothing outside the namespace
# changes: the upper layers live on a tmpfs of the namespace, and the one temporary mount point
# (under /tmp) is removed on exit.
#
# Kept visible on purpose: libpcre2-8-0 (grep and git load it; every machine with GNU grep has it).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

if [[ $# -eq 0 ]]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi
if [[ "${TPBATCH_SIM_INSIDE:-}" != 1 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: needs root (unshare -m, mount)" >&2
    exit 2
  fi
  STAGE=$(mktemp -d /tmp/tpbatch-bare-gpu.XXXXXX)
  trap 'rmdir "$STAGE" 2>/dev/null || true' EXIT
  rc=0
  TPBATCH_SIM_INSIDE=1 TPBATCH_SIM_STAGE=$STAGE unshare -m --propagation private -- bash "$0" "$@" || rc=$?
  exit $rc
fi

# ---- inside the private mount namespace --------------------------------------------------------
S=$TPBATCH_SIM_STAGE
mount -t tmpfs -o size=64m tpbatch-bare-gpu "$S"
mkdir -p "$S/usr.upper" "$S/usr.work" "$S/etc.upper" "$S/etc.work" "$S/sp.upper" "$S/sp.work"

KEEP_VISIBLE=" libpcre2-8-0 "
hidden=()
for p in $(bash "$HERE/gpu_fetch_debs.sh" --list); do
  [[ "$KEEP_VISIBLE" == *" $p "* ]] || hidden+=("$p")
done
# Installed here but not needed on the GPU machine; hidden so that nothing can find them by accident.
for p in googletest libgmock-dev hdf5-tools icu-devtools libblas-dev libblas3 liblapack-dev liblapack3 \
  libhwloc-dev libhwloc-plugins libpmix-dev libhdf5-fortran-102 libhdf5-hl-cpp-100 libhdf5-hl-fortran-100 \
  libhdf5-openmpi-dev libhdf5-openmpi-103-1 libhdf5-mpi-dev libevent-dev libnccl2 libnccl-dev \
  libaec-dev libcurl4-openssl-dev libssl-dev libjpeg62-turbo-dev libjpeg-dev; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" && hidden+=("$p")
done

# Every non-directory a hidden package owns, with its folder resolved (/lib -> /usr/lib), so that
# the whiteout lands where the overlay sees it.
list=$S/hidden.txt
dpkg -L "${hidden[@]}" 2>/dev/null | python3 -c '
import os, sys
for f in sys.stdin.read().split("\n"):
    if not f.startswith("/") or not os.path.lexists(f) or (os.path.isdir(f) and not os.path.islink(f)):
        continue
    print(os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f)))
' >"$list"
# Alternatives links (made by postinst scripts, so no package lists them) that end in a hidden file.
sort -u -o "$list" "$list"
for dir in /usr/bin /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/pkgconfig /usr/include \
  /usr/include/x86_64-linux-gnu /usr/share/man/man1; do
  [[ -d "$dir" ]] || continue
  find "$dir" -maxdepth 1 -type l -lname '/etc/alternatives/*' | while IFS= read -r l; do
    t=$(readlink -f "$l" || true)
    if [[ -z "$t" || ! -e "$t" ]] || grep -qxF "$t" "$list"; then
      echo "$l"
      echo "/etc/alternatives/$(basename "$(readlink "$l")")"
    fi
  done
done >>"$list"
# NCCL under the CUDA prefix (a tarball or wheel install: no package owns it).
for cuda in /usr/local/cuda*; do
  [[ -d "$cuda" ]] || continue
  cuda=$(readlink -f "$cuda")
  find "$cuda" -maxdepth 3 \( -name 'libnccl*' -o -name 'nccl*.h' -o -name nccl_device -o -name 'nvidia_nccl*' \) \
    -print >>"$list"
done
sort -u -o "$list" "$list"

# The NCCL library and headers for the pip-wheel layout, taken before they are whited out.
nccl_lib=""
nccl_inc=""
for cuda in /usr/local/cuda /usr/local/cuda-*; do
  [[ -z "$nccl_lib" && -f "$cuda/lib64/libnccl.so.2" ]] && nccl_lib=$(readlink -f "$cuda/lib64/libnccl.so.2")
  [[ -z "$nccl_inc" && -f "$cuda/include/nccl.h" ]] && nccl_inc=$(readlink -f "$cuda/include")
done
if [[ -z "$nccl_lib" || -z "$nccl_inc" ]]; then
  echo "error: no NCCL under /usr/local/cuda* to move into the pip-wheel layout" >&2
  exit 1
fi
touch "$S/libnccl.so.2"
mount --bind "$nccl_lib" "$S/libnccl.so.2"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
site=$(readlink -f "$site")
if [[ "$site" == /usr/* ]]; then
  wheel_upper=$S/usr.upper/${site#/usr/}/nvidia/nccl
else
  wheel_upper=$S/sp.upper/nvidia/nccl
fi
mkdir -p "$wheel_upper/include" "$wheel_upper/lib"
cp "$nccl_inc"/nccl*.h "$wheel_upper/include/"
touch "$wheel_upper/lib/libnccl.so.2"

# Whiteouts: a 0/0 character device in the upper layer hides the lower file.
counts=$(python3 - "$list" "$S" <<'PY'
import os, stat, sys
listing, stage = sys.argv[1], sys.argv[2]
n = {"usr": 0, "etc": 0}
for f in open(listing).read().split("\n"):
    top = f.split("/")[1] if f.startswith("/") else ""
    if top not in n:
        continue
    up = os.path.join(stage, top + ".upper", os.path.relpath(f, "/" + top))
    if os.path.lexists(up):
        continue
    try:
        os.makedirs(os.path.dirname(up), exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        continue  # below a folder that is whited out already
    os.mknod(up, stat.S_IFCHR | 0o600, os.makedev(0, 0))
    n[top] += 1
print(n["usr"], n["etc"])
PY
)
read -r n_usr n_etc <<<"$counts"

mount -t overlay overlay -o "lowerdir=/usr,upperdir=$S/usr.upper,workdir=$S/usr.work" /usr
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$S/etc.upper,workdir=$S/etc.work" /etc
if [[ "$site" != /usr/* ]]; then
  mount -t overlay overlay -o "lowerdir=$site,upperdir=$S/sp.upper,workdir=$S/sp.work" "$site"
fi
mount --bind "$S/libnccl.so.2" "$site/nvidia/nccl/lib/libnccl.so.2"

# Check that the machine now looks bare; refuse to run the command if anything leaked through.
leaks=()
for f in /usr/include/mpi.h /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/bin/mpirun /usr/bin/mpicxx \
  /usr/bin/mpicxx.openmpi /usr/include/hdf5/serial/hdf5.h /usr/bin/h5cc /usr/include/yaml-cpp/yaml.h \
  /usr/include/x86_64-linux-gnu/cblas.h /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
  /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libblas.so.3 \
  /usr/include/unicode/uchar.h /usr/lib/x86_64-linux-gnu/libicuuc.so.72 /usr/include/pcre2.h \
  /usr/include/gtest/gtest.h /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp \
  /usr/lib/x86_64-linux-gnu/libhdf5_serial.so.103 /usr/lib/x86_64-linux-gnu/libmpi.so.40 \
  /usr/lib/x86_64-linux-gnu/libcurl.so.4 /usr/lib/x86_64-linux-gnu/libhwloc.so.15 \
  /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so /usr/local/cuda/lib64/libnccl.so.2; do
  [[ -e "$f" ]] && leaks+=("$f")
done
[[ -f "$site/nvidia/nccl/include/nccl.h" && -s "$site/nvidia/nccl/lib/libnccl.so.2" ]] ||
  leaks+=("(pip-wheel NCCL not in place under $site)")
[[ -e "$site/nvidia/nccl/lib/libnccl.so" ]] && leaks+=("$site/nvidia/nccl/lib/libnccl.so")
if ((${#leaks[@]})); then
  echo "simulate_bare_gpu_machine: still visible: ${leaks[*]}" >&2
  exit 1
fi
echo "simulate_bare_gpu_machine: hid ${#hidden[@]} packages ($n_usr files under /usr, $n_etc under /etc) and" \
  "NCCL under the CUDA prefix; NCCL only at $site/nvidia/nccl" >&2
unset TPBATCH_SIM_INSIDE TPBATCH_SIM_STAGE
exec "$@"
