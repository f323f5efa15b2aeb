#!/usr/bin/env bash
# Install sluice's build and test dependencies from Debian when missing.
# Used by both README set-up commands and by CI. Idempotent; needs root (or sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang clang-format
      libzmq3-dev libarchive-dev zlib1g-dev check libjansson-dev libisal-dev
      dataset-fashion-mnist python3 python3-yaml python3-zmq gnuplot-nox iproute2
      help2man python3-dev python3-numpy python3-pytest python3-torch
      libmicrohttpd-dev curl prometheus
      libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev python3-pil
      libcurl4-openssl-dev nginx-light libexpat1-dev libsystemd-dev systemd
      python3-venv python3-setuptools python3-wheel python3-build python3-mypy)
# clang-format (14 on Debian 12) checks the C sources' layout (scripts/format.sh);
# libmicrohttpd serves --metrics-listen; curl and prometheus (Debian's 2.42:
# a 19 MB download, 96 MB installed, with its web UI's JavaScript packages)
# are for the /metrics tests (tests/integration/test_metrics.py), which a
# real Prometheus scrapes. libturbojpeg (libjpeg-turbo's TurboJPEG API) and
# libspng decode JPEG and PNG in the feeder's map stage (docs/map.md;
# libjpeg62-turbo-dev: libjpeg's own API, for decoding a crop's rows only);
# python3-pil makes and checks the test images. libcurl reads http(s)://
# sources (storage/sto_http.c); nginx-light serves them in
# tests/integration/test_sto_http.py.
# libexpat parses S3 listings (storage/sto_s3.c). python3-venv, -setuptools,
# -wheel and -build make and test the package with pip offline (python/setup.py,
# ctest python_pip); python3-mypy checks its type stubs (python_types).
# libsystemd's sd_notify tells systemd when the feeder serves (Type=notify
# units, deploy/systemd/; optional at build time: SLUICE_WITH_SYSTEMD);
# systemd-analyze verify checks the units (tests/cli/test_recipes.py). The S3 tests
# (tests/integration/test_sto_s3.py) run npm's s3rver 3.7.1, installed below
# into /opt/sluice-test/s3rver (needs Node.js and npm: Debian's nodejs and npm
# where no node is installed).
install_s3rver() {
  local dir=/opt/sluice-test/s3rver
  [ -x "$dir/node_modules/.bin/s3rver" ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  if ! command -v npm >/dev/null; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  echo "deps: installing s3rver@3.7.1 into $dir" >&2
  $sudo mkdir -p "$dir"
  $sudo npm install --silent --no-audit --no-fund --prefix "$dir" s3rver@3.7.1 >/dev/null
}
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  install_s3rver
  exit 0
fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_s3rver
