#!/usr/bin/env bash
# Each service binary's --help lists the flags a user needs to start it by
# hand (Abseil's default filter listed none: "No flags matched").
set -uo pipefail
fail=0
check() {  # check BINARY FLAG...
  local bin=$1; shift
  local out
  out=$("$bin" --help 2>&1)
  if grep -q "No flags matched" <<<"$out"; then
    echo "FAIL: $bin --help lists no flags"; fail=1
  fi
  for flag in "$@"; do
    if ! grep -q -- "^    --$flag " <<<"$out"; then
      echo "FAIL: $bin --help does not list --$flag"; fail=1
    fi
  done
  # Abseil's own flags stay under --helpfull.
  if grep -q -- "--flagfile" <<<"$out"; then
    echo "FAIL: $bin --help lists Abseil's --flagfile"; fail=1
  fi
}
check services/coordinator/coordinator host port port_file job_id heartbeat_ms heartbeat_misses \
  token_file tls_cert tls_key tls_ca
check services/dataserver/dataserver dataset host port port_file metrics_port token_file tls_cert
check services/shardserver/shardserver bind port port_file coordinator job_id metrics_port token_file
check services/worker/worker coordinator job_id worker_id model dataset data_servers sync sync_opt \
  batch_size lr optimizer epochs max_steps checkpoint_dir backend token_file
[ $fail -eq 0 ] && echo "every service lists its flags"
exit $fail
