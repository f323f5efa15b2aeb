#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with the package archive), before a device
# session: fetch the Debian packages that scripts/gpu-check.sh needs on the
# GPU machine, which has CUDA, CMake and Python but may lack sluice's
# libraries and can reach no package archive. They land in .gpu-debs/
# (ignored by git, ~15 MB), and Fashion-MNIST (Debian's dataset-fashion-mnist,
# ~30 MB) into .gpu-data/ for the main job on the GPU; name both in the
# device run's `carry`:
#
#   scripts/gpu-prep.sh
#   device run: carry [".gpu-debs", ".gpu-data"], command "scripts/gpu-check.sh"
#
# gpu-check.sh unpacks them into a private sysroot only when the machine's
# own pkg-config cannot find the libraries; our binaries then find them
# through their RPATH, so nothing else on that machine sees them.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(
  # ZeroMQ and what libzmq5 loads
  libzmq5 libzmq3-dev libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  # libarchive and what libarchive13 loads
  libarchive13 libarchive-dev libacl1 libbz2-1.0 liblz4-1 liblzma5 libnettle8 libxml2 libicu72 libzstd1
  # jansson, ISA-L, zlib, Check (unit tests), pkg-config
  libjansson4 libjansson-dev libisal2 libisal-dev zlib1g zlib1g-dev
  check libsubunit0 libsubunit-dev pkgconf pkgconf-bin libpkgconf3
)
mkdir -p .gpu-debs
grep -qx '/.gpu-debs/' .git/info/exclude 2>/dev/null || echo '/.gpu-debs/' >>.git/info/exclude
(cd .gpu-debs && rm -f ./*.deb && apt-get -qq download "${pkgs[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
n=$(ls .gpu-debs/*.deb | wc -l)
if [ "$n" -ne "${#pkgs[@]}" ]; then
  echo "gpu-prep: got $n of ${#pkgs[@]} packages" >&2
  exit 1
fi
mkdir -p .gpu-data/fashion-mnist
grep -qx '/.gpu-data/' .git/info/exclude || echo '/.gpu-data/' >>.git/info/exclude
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz .gpu-data/fashion-mnist/
echo "gpu-prep: $n packages, $(du -sh .gpu-debs | cut -f1) in .gpu-debs/, Fashion-MNIST in .gpu-data/ (carry both to the device run)"
