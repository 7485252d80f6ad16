#!/bin/bash
# tandem-with-host BINARY [FLAGS...]: runs BINARY --host=ADDR FLAGS..., ADDR
# being this container's own address (what its hostname resolves to), so
# peers can reach a worker on a compose network without knowing its IP in
# advance. A --host among FLAGS comes later and wins.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: tandem-with-host BINARY [FLAGS...]" >&2; exit 2; }
read -r addr _ < <(getent ahostsv4 "$(cat /proc/sys/kernel/hostname)" || true) || true
if [ -z "${addr:-}" ]; then
  echo "tandem-with-host: cannot resolve this container's hostname; pass --host" >&2
  exec "$@"
fi
bin=$1
shift
exec "$bin" "--host=$addr" "$@"
