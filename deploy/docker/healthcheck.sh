#!/bin/bash
# tandem-healthcheck PORT [HOST]: exit 0 when GET /metrics on HOST:PORT
# (default 127.0.0.1) answers 200. Bash's /dev/tcp, so the image needs no
# curl; every tandem service serves /metrics for as long as it runs.
port=${1:?usage: tandem-healthcheck PORT [HOST]}
host=${2:-127.0.0.1}
exec 3<>"/dev/tcp/$host/$port" || exit 1
printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$host" >&3
IFS= read -r -t 3 status <&3 || exit 1
case "$status" in
  "HTTP/1."?" 200"*) exit 0 ;;
  *) echo "tandem-healthcheck: $host:$port/metrics answered: $status" >&2; exit 1 ;;
esac
