#!/usr/bin/env bash
# Installs every Debian 12 package mcserve needs to build, test and benchmark.
# Idempotent and non-interactive; run as root (or with sudo available) on a fresh machine.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # C++ dependencies
  libabsl-dev libsentencepiece-dev sentencepiece libopenblas-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # the HTTP front end (server/http/): Boost.Beast and Asio (header-only), OpenSSL for HTTPS, zlib for
  # gzip/deflate request bodies
  libboost-dev libssl-dev zlib1g-dev
  # the metrics registry and its text exposition (server/metrics/)
  prometheus-cpp-dev
  # promtool (`promtool check metrics` in tests/unit/server/metrics_promtool_test.cc) and a real Prometheus
  prometheus
  # Python side: reference implementation, fixtures and tests (/usr/bin/python3)
  python3 python3-torch python3-numpy python3-pytest python3-sentencepiece python3-grpcio python3-protobuf
  # the plots of docs/quality.md (tools/quality/plot.py)
  python3-matplotlib
  # the integration tests' tools (TLS certificates, HTTP requests)
  openssl curl
  # the King James Bible text the default model is trained on (tools/train, `bible -l0`)
  bible-kjv
  # the deploy tests (tests/deploy/) read YAML: Kubernetes manifests, Prometheus rules
  python3-yaml
  # the image test (tests/image/): a Docker engine it starts itself, and the Debian base image made
  # from Debian's packages (no image registry is reachable)
  docker.io debootstrap
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm for the tests that install npm packages into the build tree at test time (tests/deploy/,
# and the openai client of tests/integration/test_openai_node.py). Debian's packages, unless a node
# with npm is already there (NodeSource's nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A mirror's transient error (a dropped connection, a 5xx) is retried rather than failing the setup.
apt=(apt-get -o Acquire::Retries=5)
$SUDO "${apt[@]}" update -q
$SUDO "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
