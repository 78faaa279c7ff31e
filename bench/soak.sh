#!/usr/bin/env bash
# Soak: `qmpi serve` on RANKS ranks (default 6: --tp 2 --pp 3) of MODEL under valid, hostile and
# slow ZeroMQ and HTTP clients for SECONDS (default 600), then SIGTERM. The chat template is
# bench/soak_template.jinja (QMPI_SOAK_TEMPLATE), whose cost hostile chat clients try to blow up. Prints requests ok,
# errors by code, lost replies (must be 0) and rank 0's RSS; writes OUT.png and OUT.csv.
#   bash bench/soak.sh MODEL [SECONDS] [OUT]        e.g. QMPI_SOAK_LAYOUT="--tp 1 --pp 1"
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$1"
seconds="${2:-600}"
out="${3:-$here/bench/results/soak}"
layout="${QMPI_SOAK_LAYOUT:---tp 2 --pp 3}"
qmpi="${QMPI:-$here/build/qmpi}"
read -r tp pp < <(echo "$layout" | sed -E 's/.*--tp ([0-9]+).*--pp ([0-9]+).*/\1 \2/')
ranks=$((tp * pp))
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
zport=$(port)
hport=$(port)
log="$out.server.log"
mkdir -p "$(dirname "$out")"
export OMP_NUM_THREADS=1
mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS "$qmpi" serve --model "$model" $layout \
  --zmq "tcp://127.0.0.1:$zport" --http "127.0.0.1:$hport" --max-model-len 256 \
  --client-buffer-bytes 65536 --comm-timeout 120 \
  --chat-template "${QMPI_SOAK_TEMPLATE:-$here/bench/soak_template.jinja}" >"$log" 2>&1 &
launcher=$!
trap 'kill $launcher 2>/dev/null || true' EXIT
# Rank 0's pid: the child of mpirun whose environment says rank 0.
rank0=""
for _ in $(seq 600); do
  for p in $(pgrep -P "$launcher" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=0'; then
      rank0=$p
    fi
  done
  [[ -n $rank0 ]] && grep -q "http: listening" "$log" && break
  sleep 0.2
done
[[ -n $rank0 ]] || { echo "soak: the server did not start"; cat "$log"; exit 1; }
until /usr/bin/python3 - "$hport" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=2)
c.request("GET", "/health")
sys.exit(0 if c.getresponse().status == 200 else 1)
PY
do sleep 1; done
rc=0
/usr/bin/python3 "$here/bench/soak.py" --zmq "tcp://127.0.0.1:$zport" --http "127.0.0.1:$hport" \
  --rss-pid "$rank0" --duration "$seconds" --out "$out" || rc=$?
kill -TERM "$rank0"
wait "$launcher" || true
trap - EXIT
grep -E "went away|dropped a client|error QM" "$log" | sort | uniq -c | sort -rn | head -5 || true
exit $rc
