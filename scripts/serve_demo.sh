#!/usr/bin/env bash
# Sets everything up, builds the server and the Python client, starts `mcserve` on the bundled model
# (free ports, loopback), streams a completion through `mcserve-client`, and stops the server.
# MCSERVE_SKIP_BUILD=1 skips set-up and build (the tests use it on an existing build).
# MCSERVE_SERVER_ARGS adds server flags, e.g. the model trained with Memory Caching (SSC) with its
# checkpoints in the host tier:
#   MCSERVE_SERVER_ARGS="--model models/kjv-gdn-mc --checkpoint_device_mib 0 --checkpoint_host_mib 64" \
#     scripts/serve_demo.sh "The pass key is 40213. Remember it. ... What is the pass key? The pass key is"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MCSERVE_BUILD_DIR:-$root/build}
if [ -z "${MCSERVE_SKIP_BUILD:-}" ]; then
  bash "$root/scripts/setup.sh"
  bash "$root/scripts/build.sh" mcserve mcserve_python_client
fi
prompt=${1:-"The cat watched the gulls from the window."}

out=$(mktemp)
read -r -a server_args <<<"${MCSERVE_SERVER_ARGS:-}"
"$build/server/mcserve" --host 127.0.0.1 --grpc-port 0 --http-port 0 "${server_args[@]}" >"$out" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 600); do  # the first line says where it listens
  line=$(head -n 1 "$out")
  [ -n "$line" ] && break
  kill -0 "$server" 2>/dev/null || { echo "serve_demo: mcserve exited" >&2; exit 1; }
  sleep 0.1
done
echo "$line" >&2
grpc=$(sed -E 's/^mcserve listening grpc=(\S+) http=(\S+)$/\1/' <<<"$line")

"$build/clients/python/mcserve-client" --address "$grpc" stream "$prompt" --max-tokens 48 --seed 7
kill -TERM "$server"
wait "$server"
