#!/bin/bash
# libtandem_bind_source.so: an unbound TCP connect leaves from
# $TANDEM_BIND_SOURCE. Runs in a private network namespace (unshare -n);
# prints SKIP and exits 0 where none can be made.
set -u
export PATH="$PATH:/usr/sbin:/sbin"
dir="$TEST_SRCDIR/tandem/tools/tandem"
if ! unshare -n true 2>/dev/null; then
  echo "SKIP: cannot create a network namespace (unshare -n needs root or CAP_SYS_ADMIN)"
  exit 0
fi
exec unshare -n bash -c '
set -u
dir="$1"
ip link set lo up && ip addr add 127.0.1.1/8 dev lo && ip addr add 127.0.1.2/8 dev lo || exit 1
python3 -c "
import socket
s = socket.socket(); s.bind((\"127.0.1.2\", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True: s.accept()[0].close()
" > "$TEST_TMPDIR/port" &
listener=$!
for _ in $(seq 100); do [ -s "$TEST_TMPDIR/port" ] && break; sleep 0.05; done
port=$(cat "$TEST_TMPDIR/port")
plain=$("$dir/connect_probe" 127.0.1.2 "$port")
shimmed=$(TANDEM_BIND_SOURCE=127.0.1.1 LD_PRELOAD="$dir/libtandem_bind_source.so" \
          "$dir/connect_probe" 127.0.1.2 "$port")
kill $listener
echo "without the library: $plain; with it: $shimmed"
if [ "$shimmed" != 127.0.1.1 ]; then echo "FAIL: source is $shimmed, want 127.0.1.1"; exit 1; fi
if [ "$plain" = 127.0.1.1 ]; then echo "FAIL: the probe binds by itself; the test proves nothing"; exit 1; fi
echo "all passed"
' bash "$dir"
