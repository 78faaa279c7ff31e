#!/usr/bin/env bash
# Starts a private one-node Slurm (Debian's slurm-wlm) on this machine, for tests and for trying
# launch/slurm/*.sh by hand:
#
#   eval "$(tests/slurm/start.sh /tmp/qmpi-slurm)"     # prints: export SLURM_CONF=...
#   sbatch ... launch/slurm/qwen72b.sh
#   tests/slurm/stop.sh /tmp/qmpi-slurm
#
# Installs the packages when missing (apt-get, idempotent; needs root, as the daemons do), then
# runs munged on a private socket and key, slurmctld and slurmd on loopback ports with all state,
# logs and pid files under STATE_DIR. Waits until the node is idle. Nothing outside STATE_DIR
# is written, apart from the Debian packages.
# Settings: QMPI_SLURM_CPUS (8), QMPI_SLURM_GPUS (8 stand-ins), QMPI_SLURM_PORT (26817; slurmd
# uses the next port).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state="${1:?usage: start.sh STATE_DIR (a new or empty folder)}"
cpus="${QMPI_SLURM_CPUS:-8}"
gpus="${QMPI_SLURM_GPUS:-8}"
ctld_port="${QMPI_SLURM_PORT:-26817}"
slurmd_port=$((ctld_port + 1))

say() { echo "slurm-start: $*" >&2; }
started=0  # once a daemon may be running, a failure stops everything again
die() {
  say "error: $*"
  ((started)) && "$here/stop.sh" "$state"
  exit 1
}
trap 'die "the command on line $LINENO failed"' ERR

[[ $(id -u) -eq 0 ]] || die "slurmctld/slurmd and the package install need root (running as uid $(id -u))"

packages=(slurm-wlm munge libpmix-dev)
# libpmix-dev: Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so that only it ships.
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  install_pkgs() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      >"$state.apt.log" 2>&1
  }
  mkdir -p "$(dirname "$state")"
  if ! install_pkgs; then
    apt-get update -qq >>"$state.apt.log" 2>&1 || true
    install_pkgs || { cat "$state.apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
  fi
  rm -f "$state.apt.log"
fi
for tool in munged mungekey slurmctld slurmd sinfo scontrol; do
  command -v "$tool" >/dev/null || die "$tool is missing after installing ${packages[*]}"
done

if [[ -e "$state" && -n "$(ls -A "$state" 2>/dev/null)" ]]; then
  die "$state exists and is not empty; give a new folder (stop.sh removes a finished one)"
fi
for port in "$ctld_port" "$slurmd_port"; do
  if ss -ltnH "( sport = :$port )" 2>/dev/null | grep -q .; then
    die "port $port is already in use (another Slurm?); set QMPI_SLURM_PORT to a free port"
  fi
done

host="$(hostname -s)"
# munged insists that every folder above its socket is searchable by all, and that no one else
# can write where its key lives.
mkdir -p "$state"
chmod 755 "$state"
touch "$state/.qmpi-slurm-state"  # stop.sh deletes only folders carrying this mark
mkdir -p "$state"/{etc,ctld,spool,run,log,tmpfs}
install -d -m 755 "$state/munge"
mungekey -c -k "$state/munge/munge.key" >/dev/null 2>&1 ||
  { dd if=/dev/urandom of="$state/munge/munge.key" bs=1 count=1024 status=none &&
    chmod 600 "$state/munge/munge.key"; }
started=1
munged --socket="$state/munge/munge.socket" --key-file="$state/munge/munge.key" \
  --pid-file="$state/run/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/munge/munged.seed" ||
  die "munged did not start: $(tail -n 3 "$state/log/munged.log" 2>/dev/null)"
munge --socket="$state/munge/munge.socket" -n | unmunge --socket="$state/munge/munge.socket" >/dev/null ||
  die "munge cannot encode and decode a credential on $state/munge/munge.socket"

sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$state|g" -e "s|@CPUS@|$cpus|g" -e "s|@GPUS@|$gpus|g" \
  -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@SLURMD_PORT@|$slurmd_port|g" \
  "$here/slurm.conf.in" >"$state/etc/slurm.conf"
# Stand-in "GPUs": Slurm drops GPUs that have no device file, and wants character devices, so
# each one is a link to /dev/null. Jobs can then ask for --gpus-per-node as on a GPU cluster
# and get CUDA_VISIBLE_DEVICES set; the test runs the CPU backend, which ignores it.
mkdir -p "$state/dev"
for ((i = 0; i < gpus; i++)); do ln -s /dev/null "$state/dev/gpu$i"; done
echo "NodeName=$host Name=gpu File=$state/dev/gpu[0-$((gpus - 1))]" >"$state/etc/gres.conf"
export SLURM_CONF="$state/etc/slurm.conf"

start=$(date +%s%N)
slurmctld -f "$SLURM_CONF" || die "slurmctld did not start: $(tail -n 5 "$state/log/slurmctld.log" 2>/dev/null)"
slurmd -f "$SLURM_CONF" || die "slurmd did not start: $(tail -n 5 "$state/log/slurmd.log" 2>/dev/null)"
for _ in $(seq 300); do
  node_state="$(sinfo -h -n "$host" -o %T 2>/dev/null || true)"
  [[ "$node_state" == idle || "$node_state" == *drain* || "$node_state" == inval ]] && break
  sleep 0.1
done
if [[ "$node_state" != idle ]]; then
  tail -n 20 "$state/log/slurmctld.log" "$state/log/slurmd.log" >&2 || true
  die "node $host is '${node_state:-unknown}', not idle (slurmd and slurmctld logs above)"
fi
say "node $host idle after $(( ($(date +%s%N) - start) / 1000000 )) ms ($cpus CPUs, $gpus stand-in GPUs, ports $ctld_port/$slurmd_port)"
echo "export SLURM_CONF=$SLURM_CONF"
