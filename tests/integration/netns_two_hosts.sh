#!/usr/bin/env bash
# Two hosts for real: two network namespaces joined by a veth link, each with its own hostname,
# and Open MPI starting its daemon in the second one through an rsh agent (the way it would use
# ssh). `mpirun -np 6` over a hostfile of the two hosts with 3 slots each, started by the
# launch/mpirun/qmpi.sh recipe, running `qmpi logits --tp 3 --pp 2`, must then place one TP group
# on each host, send the pipeline hop over TCP between them, and produce the logits of a
# single-rank run (both with float32 activations and K/V, so that the 1e-5 bound is about the
# layout, not about where a bf16 rounding falls). Needs root (ip netns, unshare); fails, never
# skips, when that is not allowed.
# Traffic stays on the link this test creates: the root namespace gets no address on it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
QMPI="${QMPI:-$here/../../build/qmpi}"
MPIRUN="${MPIRUN:-mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
PY=/usr/bin/python3

die() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ -x "$QMPI" ]] || die "QMPI=$QMPI is not an executable (build the qmpi target)"
for tool in ip unshare hostname "$MPIRUN"; do
  command -v "$tool" >/dev/null || die "'$tool' is not installed (iproute2 / util-linux / openmpi-bin)"
done
[[ $(id -u) -eq 0 ]] || die "this test creates network namespaces and needs root (running as uid $(id -u))"

# Names unique to this run, so a concurrent or crashed earlier run cannot collide with it.
tag=$$
h1="qmpi-h1-$tag" h2="qmpi-h2-$tag"
veth1="qv1-$tag" veth2="qv2-$tag"
subnet=10.199.77
tmp="$(mktemp -d "${QMPI_TEST_TMP:-/tmp}/netns_two_hosts.XXXXXX" 2>/dev/null || mktemp -d)"
created=()

cleanup() {
  local rc=$?
  for ns in "${created[@]}"; do
    # Anything still running inside (a hung orted) would keep the namespace alive.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || echo "warning: could not delete namespace $ns" >&2
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s%N)
if ! err=$(ip netns add "$h1" 2>&1); then
  die "cannot create a network namespace (ip netns add $h1: $err); this test needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN"
fi
created+=("$h1")
ip netns add "$h2"
created+=("$h2")
ip link add "$veth1" type veth peer name "$veth2"
ip link set "$veth1" netns "$h1"
ip link set "$veth2" netns "$h2"
ip -n "$h1" addr add "$subnet.1/24" dev "$veth1"
ip -n "$h2" addr add "$subnet.2/24" dev "$veth2"
for pair in "$h1:$veth1" "$h2:$veth2"; do
  ns=${pair%%:*} dev=${pair#*:}
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$dev" up
done
ip -n "$h1" -br addr show dev "$veth1"
ip -n "$h2" -br addr show dev "$veth2"
if ip -br addr | grep -q "$subnet\."; then die "the root namespace has an address on $subnet.0/24"; fi

# Open MPI calls the agent like ssh: `agent HOST WORD...`, the words carrying shell quoting.
# Each host gets its own UTS namespace with hostname = its --host name: Open MPI identifies
# nodes by hostname, and two "hosts" sharing one name break its shared-memory grouping.
agent="$tmp/ns-agent"
cat >"$agent" <<'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; $*"
EOF
chmod +x "$agent"

"$QMPI" make-model --preset tiny --seed 5 --out "$tmp/tiny" >"$tmp/make-model.log" 2>&1 ||
  { cat "$tmp/make-model.log"; die "qmpi make-model failed"; }
ids=9707,11,1879,0,25,13,151644,872,198,3838,374,279,6722,315,9625,30
exact_kv=(--dtype float32 --kv-dtype f32)  # testlib.EXACT_KV (tests/integration/testlib.py says why)
"$QMPI" logits --model "$tmp/tiny" --ids "$ids" "${exact_kv[@]}" --out "$tmp/single.npy" >"$tmp/single.log" 2>&1 ||
  { cat "$tmp/single.log"; die "single-rank qmpi logits failed"; }

# mpirun runs inside the first host (only the namespaces have addresses on the link) with that
# host's name; it starts ranks 0-2 itself and an orted in the second host through the agent.
# The mpirun line is the recipe's (launch/mpirun/qmpi.sh: hostfile, --map-by ppr:3:node), with
# the agent and the link's subnet added through MPIRUN_ARGS.
printf '%s slots=3\n%s slots=3\n' "$h1" "$h2" >"$tmp/hostfile"
log="$tmp/mpirun.log"
tx_bytes() { ip netns exec "$h2" cat "/sys/class/net/$veth2/statistics/tx_bytes"; }
tx_before=$(tx_bytes)
export HOSTFILE="$tmp/hostfile" TP=3 PP=2 BACKEND=cpu MODEL="$tmp/tiny" QMPI_BIN="$QMPI" MPIRUN
export MPIRUN_ARGS="--mca plm_rsh_agent $agent --mca btl tcp,self \
  --mca btl_tcp_if_include $subnet.0/24 --mca oob_tcp_if_include $subnet.0/24"
recipe="$here/../../launch/mpirun/qmpi.sh"
DRY_RUN=1 bash "$recipe" logits --ids "$ids" "${exact_kv[@]}" --out "$tmp/two_hosts.npy"
set +e
timeout 120 ip netns exec "$h1" unshare --uts sh -c "hostname $h1; exec \"\$@\"" sh \
  bash "$recipe" logits --ids "$ids" "${exact_kv[@]}" --out "$tmp/two_hosts.npy" >"$log" 2>&1
rc=$?
set -e
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
sed -e 's/\x1b\[[0-9;]*m//g' "$log"
((rc == 0)) || die "mpirun across $h1 and $h2 exited $rc"
tx_after=$(tx_bytes)

# The mapping table: ranks 0-2 (stage 0, TP ranks 0-2) on the first host, 3-5 on the second.
fail=0
table=$(sed -e 's/\x1b\[[0-9;]*m//g' "$log" | awk '$1 ~ /^[0-5]$/ && $3 == "cpu" && NF >= 6')
echo "$table"
for r in 0 1 2 3 4 5; do
  want_host=$h1 want_stage=0
  ((r >= 3)) && want_host=$h2 want_stage=1
  row=$(awk -v r="$r" '$1 == r' <<<"$table")
  read -r _ host _ stage tp _ <<<"$row"
  if [[ "$host" != "$want_host" || "$stage" != "$want_stage" || "$tp" != $((r % 3)) ]]; then
    echo "FAIL: mapping row of rank $r is '$row'; want host $want_host stage $want_stage tp $((r % 3))" >&2
    fail=1
  fi
done
stage_hosts=$(awk '{print $4, $2}' <<<"$table" | sort -u)
[[ $(awk '{print $1}' <<<"$stage_hosts" | uniq -d) == "" ]] ||
  { echo "FAIL: a TP group spans hosts: $stage_hosts" >&2; fail=1; }
[[ $(awk '{print $2}' <<<"$stage_hosts" | sort -u | wc -l) == 2 ]] ||
  { echo "FAIL: the pipeline does not cross hosts: $stage_hosts" >&2; fail=1; }

# The logits of the two-host run against the single-rank run.
"$PY" - "$tmp/single.npy" "$tmp/two_hosts.npy" <<'PY' || fail=1
import sys
import numpy as np
ref, got = np.load(sys.argv[1]), np.load(sys.argv[2])
if got.shape != ref.shape or got.dtype != ref.dtype:
    sys.exit(f"FAIL: two-host logits are {got.dtype}{got.shape}, single-rank {ref.dtype}{ref.shape}")
rel = float(np.max(np.abs(got.astype(np.float64) - ref)) / np.max(np.abs(ref)))
same_argmax = bool((got.argmax(axis=1) == ref.argmax(axis=1)).all())
print(f"logits {got.shape}: max relative difference {rel:.3g} (limit 1e-5), "
      f"argmax equal at every position: {same_argmax}")
if not (rel <= 1e-5 and same_argmax):
    sys.exit("FAIL: two-host logits differ from the single-rank run")
PY

# The last stage (second host) returns every position's logits to rank 0 on the first host:
# at least positions x vocab x 4 bytes must have crossed the veth link.
n_ids=$(tr ',' '\n' <<<"$ids" | wc -l)
vocab=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$tmp/tiny/config.json")
want=$((n_ids * vocab * 4)) sent=$((tx_after - tx_before))
echo "bytes sent from $h2 over $veth2 during the run: $sent (logits alone: $want)"
((sent >= want)) || { echo "FAIL: too little traffic crossed the link between the hosts" >&2; fail=1; }
for ns in "$h1" "$h2"; do
  [[ -z "$(ip netns pids "$ns")" ]] || { echo "FAIL: processes left in $ns after mpirun" >&2; fail=1; }
done
((fail == 0)) || exit 1
echo "netns_two_hosts: all checks passed (${elapsed} ms including namespace setup and the single-rank run)"
