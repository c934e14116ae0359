#!/usr/bin/env bash
# Installs every Debian package tpbatch needs to build, test and run (idempotent).
# Run as root on Debian 12. `apt-get update` runs once per invocation, only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools
  libyaml-cpp-dev
  libgtest-dev
  nlohmann-json3-dev
  libcli11-dev
  libopenblas-dev
  libpcre2-dev libicu-dev
  clang libclang-rt-14-dev
  python3 python3-numpy python3-h5py python3-pandas python3-jinja2 python3-jsonschema time bc
  slurmctld slurmd slurm-client munge libpmix-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
