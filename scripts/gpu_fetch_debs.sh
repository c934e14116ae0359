#!/usr/bin/env bash
# Downloads (never installs) the Debian packages that the GPU test machine lacks, so that
# scripts/gpu_check.sh can unpack them there into a private prefix (see docs/cuda.md "GPU check").
#   scripts/gpu_fetch_debs.sh DIR      # apt-get download into DIR (e.g. build-debs/, ignored by git)
#   scripts/gpu_fetch_debs.sh --list   # print the package names, one a line (the simulation hides these)
# The device tool carries at most 64 MiB (tracked tree + carried folders): the total is checked.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

# The build and run dependencies of tpbatch, and every runtime library they load that a bare
# machine with only CUDA, Python and a compiler lacks (found with ldd under
# scripts/simulate_bare_gpu_machine.sh). Grouped by what pulls them in.
PACKAGES=(
  # Open MPI and what its libraries load
  libopenmpi-dev openmpi-bin openmpi-common libopenmpi3 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1
  libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libltdl7
  # HDF5 and libcurl4 (HDF5's ROS3 driver) with its own dependencies
  libhdf5-dev hdf5-helpers libhdf5-103-1 libhdf5-hl-100 libhdf5-cpp-103-1 libsz2 libaec0 libcurl4
  libldap-2.5-0 libsasl2-2 libsasl2-modules-db libssh2-1 librtmp1 libnghttp2-14 libpsl5 libbrotli1
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libdb5.3
  # libpsl5 links libunistring.so.2 itself (Ubuntu 24.04 has only .so.5); hwloc and verbs, libudev
  libunistring2 libudev1
  # the rest of the build: YAML, JSON, CLI, BLAS, PCRE2, ICU, GoogleTest, pkg-config
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev libopenblas-dev libopenblas-pthread-dev
  libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0 libpcre2-dev libpcre2-8-0 libpcre2-16-0
  libpcre2-32-0 libpcre2-posix3 libicu-dev libicu72 libgtest-dev pkgconf pkgconf-bin pkg-config
  libpkgconf3 zlib1g-dev
)

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR | --list" >&2
  exit 2
fi

DIR=$1
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
cd "$DIR"
# Re-downloads only what is missing; a partial download from an earlier run is replaced.
missing=()
for p in "${PACKAGES[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "downloading ${#missing[@]} packages into $DIR"
  # apt runs the download as _apt, which cannot write into root-owned folders: say so quietly.
  timeout 600 apt-get download "${missing[@]}" 2>&1 | grep -v -E "^(Get:|W: Download is performed unsandboxed)" || true
fi
still=()
for p in "${PACKAGES[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || still+=("$p")
done
if ((${#still[@]})); then
  echo "error: could not download: ${still[*]} (apt-get update? network?)" >&2
  exit 1
fi

debs_bytes=$(cat ./*.deb | wc -c)
echo "$(ls ./*.deb | wc -l) .debs, $((debs_bytes / 1024)) KiB in $DIR"
if git -C "$REPO" rev-parse >/dev/null 2>&1; then
  # What the device tool carries besides the carried folders: tracked and untracked, not ignored.
  tree_bytes=$(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  total=$((tree_bytes + debs_bytes))
  echo "working tree $((tree_bytes / 1024)) KiB + debs = $((total / 1024)) KiB of the 65536 KiB the device tool carries"
  if ((total > 60 * 1024 * 1024)); then
    echo "error: over 60 MiB together: the device tool would refuse or truncate the carry" >&2
    exit 1
  fi
fi
