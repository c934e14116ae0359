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
  python3 python3-venv python3-numpy python3-h5py python3-pandas python3-jinja2 python3-jsonschema time bc
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

# The reference engine the constraint tests hold our masks to: llguidance (Rust, with a Python
# binding; the engine behind llama.cpp's and vLLM's guidance backend), from PyPI as a prebuilt
# wheel, in a virtual environment beside the clone that also sees the Debian packages above.
# Without PyPI setup goes on and the tests that need it report skipped.
REF_VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv-reference"
LLGUIDANCE=llguidance==1.9.1
if "$REF_VENV/bin/python" -c "import importlib.metadata as m; assert m.version('llguidance') == '${LLGUIDANCE#*==}'" 2>/dev/null; then
  echo "setup: $LLGUIDANCE present in $REF_VENV"
elif /usr/bin/python3 -m venv --system-site-packages "$REF_VENV" &&
  timeout 300 "$REF_VENV/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary :all: \
    --timeout 20 --retries 1 "$LLGUIDANCE"; then
  echo "setup: $LLGUIDANCE installed in $REF_VENV"
else
  echo "setup: could not install $LLGUIDANCE from PyPI; the tests comparing with it will report skipped"
fi
