#!/usr/bin/env bash
# One call on a GPU machine that checks the CUDA backend end to end and times it: build (or
# unpack a prepared bundle), the CUDA unit tests (every kernel against the CPU backend on fresh
# random data), `qmpi logits` with --backend cuda against --backend cpu on the tiny and the
# qwen2.5-0.5b presets (the latter also with f32 and fp8 KV caches besides the default bf16)
# and the tiny Qwen3, Qwen2-MoE and Qwen3-MoE ones, the 6-rank --tp 2 --pp 3 --comm mpi layout
# on the one GPU (and every rank's "memory predicted / actual" line, its KV cache sized from the
# device), the 3-rank uneven --tp 3 (5,5,4 heads over 2 KV heads) on it too, a --dp 2 --tp 3
# batch against one rank's, and decode / prefill tokens/s next to the HBM roofline (weight
# bytes per token / measured copy bandwidth).
# CUDA graphs (--cuda-graphs): a greedy batch of decode sizes 8..1 gives the eager tokens, and
# decode tokens/s with graphs next to the eager bench.
# Kernel timing rows: flash-decoding against the single-pass attention kernel at contexts 4k and
# 16k, the fused residual add + RMSNorm against add then RMSNorm, and RMSNorm + q/k/v GEMMs with
# the bf16 copy the norm writes against converting x (each checked equal first).
# int4 rows: the int4 device test (in the CUDA unit tests), `qmpi logits` cuda vs cpu on a GPTQ
# act-order tiny model and an AWQ g128 qwen2.5-0.5b, and that model's decode / prefill tokens/s.
# Finishes inside QMPI_CHECK_BUDGET_S seconds (default 450) and prints a short table last;
# logs go to $OUT when set (the device tool brings them back), else /tmp/qmpi-gpu-check.
#
# On the GPU machine, from a copy of the repository:
#   bash bench/gpu_check.sh
# carrying .cache/qwen-tokenizer (make-model copies the tokenizer from it; the .cache folder is
# not part of the copy) and, when that machine lacks qmpi's Debian build dependencies (MPI,
# HDF5, spdlog, Boost, GTest, ...: the device image has CUDA, CMake and ninja but no registry to
# install them from), .gpu-bundle as well. The script first tries a native build (Release,
# -DQMPI_CUDA=ON, sm_90 only) and falls back to the bundle. Through the device tool:
#   run(command="bash bench/gpu_check.sh", carry=[".cache/qwen-tokenizer", ".gpu-bundle"],
#       timeout_s=540)
#
# On the dev machine (Debian 12 with scripts/setup.sh's packages), before the GPU call:
#   bash bench/gpu_check.sh prepare
# builds Release for sm_90 without -march=native into build-gpu-bundle/ and packs qmpi,
# test_cuda, the shared libraries they load (not glibc, and not cuBLAS/NCCL, which the GPU
# machine has) and the Open MPI runtime into .gpu-bundle/bundle.tar.gz (about 17 MB,
# git-excluded).
#
# On a machine without a GPU, `bash bench/gpu_check.sh --cpu-dry-run` runs the same steps with
# --backend cpu (device tests may skip) to check the script and a bundle before spending
# device time; its comparisons are CPU against CPU and prove nothing about the CUDA backend.
#
# Exit status: 0 when every check passed.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle_tar="$repo/.gpu-bundle/bundle.tar.gz"
multiarch=x86_64-linux-gnu
ompi_plugins=/usr/lib/$multiarch/openmpi/lib/openmpi3
pmix_plugins=/usr/lib/$multiarch/pmix2/lib/pmix
# Fabric plugins the single-host runs never use; leaving them out keeps their libraries
# (UCX, libfabric, verbs, PSM) out of the bundle.
skip_plugins='ucx|uct|ofi|openib|psm|usnic|verbs|java|hcoll|fca|portals|cuda'
# Libraries every Linux has (glibc) or the GPU machine provides (cuBLAS, NCCL, the driver).
skip_libs='/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libcuda|libcublas|libcublasLt|libnccl|libnvidia[^/]*)\.so'
gpu_libs=(libcublas.so.13 libcublasLt.so.13 libnccl.so.2)

# ---------------------------------------------------------------------------- prepare (dev box)
prepare() {
  local build="$repo/build-gpu-bundle" stage
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQMPI_CUDA=ON \
    -DQMPI_CUDA_ARCHS=90 -DQMPI_NATIVE=OFF >/dev/null || return 1
  cmake --build "$build" -j"$(nproc)" --target qmpi test_cuda || return 1
  stage="$(mktemp -d)"
  mkdir -p "$stage"/bin "$stage"/lib/fallback "$stage"/ompi/plugins "$stage"/ompi/etc \
    "$stage"/ompi/share "$stage"/pmix/plugins
  cp "$build/qmpi" "$build/tests/test_cuda" "$stage/bin/"
  cp -L "$(readlink -f "$(command -v mpirun)")" "$stage/bin/mpirun"
  cp -L "$(command -v orted)" "$stage/bin/orted"
  local f
  for f in "$ompi_plugins"/*.so; do
    [[ "$(basename "$f")" =~ $skip_plugins ]] || cp "$f" "$stage/ompi/plugins/"
  done
  cp "$pmix_plugins"/*.so "$stage/pmix/plugins/"
  cp -r /usr/share/openmpi "$stage/ompi/share/openmpi"
  cp /etc/openmpi/openmpi-mca-params.conf "$stage/ompi/etc/"
  # Every library the binaries and plugins load, resolved here; libstdc++/libgcc_s only as a
  # fallback for an older system (they need this machine's glibc 2.36).
  local lib missing=0
  while read -r lib; do
    [[ "$lib" =~ $skip_libs ]] && continue
    case "$(basename "$lib")" in
      libstdc++.so*|libgcc_s.so*) cp -Ln "$lib" "$stage/lib/fallback/" ;;
      *) cp -Ln "$lib" "$stage/lib/" ;;
    esac
  done < <(for f in "$stage"/bin/* "$stage"/ompi/plugins/*.so "$stage"/pmix/plugins/*.so; do
             ldd "$f" | awk '/=> \// {print $3}'
           done | sort -u)
  for f in "$stage"/bin/* "$stage"/ompi/plugins/*.so "$stage"/pmix/plugins/*.so; do
    if ldd "$f" | grep -q 'not found'; then
      echo "prepare: $f needs a library not on this machine:" >&2
      ldd "$f" | grep 'not found' >&2
      missing=1
    fi
  done
  mkdir -p "$(dirname "$bundle_tar")"
  tar -C "$stage" -czf "$bundle_tar" . || return 1
  rm -rf "$stage"
  local exclude="$repo/.git/info/exclude"
  if [[ -d "$repo/.git" ]] && ! grep -qx '/.gpu-bundle/' "$exclude" 2>/dev/null; then
    echo '/.gpu-bundle/' >>"$exclude"
  fi
  echo "prepare: wrote $bundle_tar ($(du -h "$bundle_tar" | cut -f1)); carry .gpu-bundle and .cache/qwen-tokenizer"
  return $missing
}

if [[ "${1:-}" == prepare ]]; then
  prepare
  exit $?
fi

# ---------------------------------------------------------------------------- check (GPU box)
backend=cuda
allow_skips=0
if [[ "${1:-}" == --cpu-dry-run ]]; then
  backend=cpu
  allow_skips=1
elif [[ $# -gt 0 ]]; then
  echo "usage: bench/gpu_check.sh [prepare | --cpu-dry-run]" >&2
  exit 2
fi
out="${OUT:-/tmp/qmpi-gpu-check}"
work=/tmp/qmpi-gpu-work
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work"
log="$out/gpu_check.log"
: >"$log"
budget="${QMPI_CHECK_BUDGET_S:-450}"
deadline=$((SECONDS + budget))
rows=()
failed=0

note() { echo "$*" | tee -a "$log"; }
row() {  # row NAME STATUS VALUE
  rows+=("$1|$2|$3")
  [[ "$2" == FAIL ]] && failed=1
  note "== $1: $2 $3"
}
# A command as the log shows it: without `env` and its VAR=value words.
shown() {
  [[ "${1:-}" == env ]] && shift
  while [[ "${1:-}" == [A-Z_]*=* ]]; do shift; done
  echo "$*"
}
# run LIMIT CMD...: the command's output goes to the log; the limit shrinks to the time left.
run() {
  local limit="$1"
  shift
  local left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "+ (out of time) $*" >>"$log"
    return 124
  fi
  echo "+ $(shown "$@")" >>"$log"
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
}
# run_to FILE LIMIT CMD...: as run, with the command's standard output kept in FILE too.
run_to() {
  local file="$1" limit="$2"
  shift 2
  local left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "+ (out of time) $*" >>"$log"
    return 124
  fi
  echo "+ $(shown "$@") > $file" >>"$log"
  timeout -k 5 "$limit" "$@" >"$file" 2>>"$log"
  local rc=$?
  cat "$file" >>"$log"
  return $rc
}

py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then
    py="$p"
    break
  fi
done

if [[ -z "$py" ]]; then
  row "python3 with numpy" FAIL "needed to compare logits and read bench output"
fi
if command -v nvidia-smi >/dev/null; then
  note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
fi
note "host: $(nproc) cores, $(uname -r); nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# --- build: native when the machine has the dependencies, else the prepared bundle
declare -a qenv=()  # environment for every qmpi / mpirun command
qmpi="" test_cuda="" mpirun=""

find_gpu_lib_dirs() {  # directories holding cuBLAS and NCCL on this machine
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
               "/usr/lib/$multiarch" /usr/local/nvidia/lib64 /opt)
  if [[ -n "$py" ]]; then
    mapfile -t -O "${#roots[@]}" roots < <("$py" -c \
      'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
  fi
  local lib d dirs=()
  for lib in "${gpu_libs[@]}"; do
    d="$(find -H "${roots[@]}" -maxdepth 6 -name "$lib" -print -quit 2>/dev/null)"
    [[ -n "$d" ]] && dirs+=("$(dirname "$d")")
  done
  printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:
}

native_build() {
  local gen=() nccl=() b="$work/build"
  command -v ninja >/dev/null && gen=(-G Ninja)
  if [[ ! -e /usr/local/cuda/lib64/libnccl.so && ! -e /usr/local/cuda/lib/libnccl.so ]]; then
    local inc so
    so="$(find / -xdev -name 'libnccl.so*' -path '*nvidia*' -print -quit 2>/dev/null)"
    inc="$(find / -xdev -name nccl.h -path '*nvidia*' -print -quit 2>/dev/null)"
    [[ -n "$so" && -n "$inc" ]] && nccl=(-DNCCL_LIBRARY="$so" -DNCCL_INCLUDE_DIR="$(dirname "$inc")")
  fi
  run 90 cmake -S "$repo" -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DQMPI_CUDA=ON \
    -DQMPI_CUDA_ARCHS=90 "${nccl[@]}" || return 1
  run 330 cmake --build "$b" -j"$(nproc)" --target qmpi test_cuda || return 2
  qmpi="$b/qmpi" test_cuda="$b/tests/test_cuda" mpirun="$(command -v mpirun)"
}

use_bundle() {
  [[ -f "$bundle_tar" ]] || return 1
  local b="$work/bundle" gpu_dirs ldp
  mkdir -p "$b"
  run 60 tar -C "$b" -xzf "$bundle_tar" || return 1
  gpu_dirs="$(find_gpu_lib_dirs)"
  note "bundle: cuBLAS/NCCL from ${gpu_dirs:-nowhere}"
  ldp="$b/lib${gpu_dirs:+:$gpu_dirs}"
  if ! env LD_LIBRARY_PATH="$ldp" "$b/bin/qmpi" --help >/dev/null 2>>"$log"; then
    ldp="$b/lib:$b/lib/fallback${gpu_dirs:+:$gpu_dirs}"  # an older libstdc++ than Debian 12's
    env LD_LIBRARY_PATH="$ldp" ldd "$b/bin/qmpi" >>"$log" 2>&1
    env LD_LIBRARY_PATH="$ldp" "$b/bin/qmpi" --help >/dev/null 2>>"$log" || return 2
  fi
  qenv=(LD_LIBRARY_PATH="$ldp" PATH="$b/bin:$PATH"
        OPAL_PREFIX="$b/ompi" OPAL_EXEC_PREFIX="$b/ompi" OPAL_BINDIR="$b/bin"
        OPAL_LIBDIR="$b/lib" OPAL_PKGLIBDIR="$b/ompi/plugins" OPAL_DATAROOTDIR="$b/ompi/share"
        OPAL_DATADIR="$b/ompi/share" OPAL_PKGDATADIR="$b/ompi/share/openmpi"
        OPAL_SYSCONFDIR="$b/ompi/etc" OMPI_MCA_mca_base_component_path="$b/ompi/plugins"
        OMPI_MCA_mca_base_component_show_load_errors=0
        PMIX_INSTALL_PREFIX="$b/pmix" PMIX_MCA_mca_base_component_path="$b/pmix/plugins")
  qmpi="$b/bin/qmpi" test_cuda="$b/bin/test_cuda" mpirun="$b/bin/mpirun"
}

t0=$SECONDS
if native_build; then
  row "build" ok "native, $((SECONDS - t0)) s"
elif use_bundle; then
  row "build" ok "prepared bundle (native build impossible here: see log), $((SECONDS - t0)) s"
else
  row "build" FAIL "no native build and no usable .gpu-bundle (run 'bench/gpu_check.sh prepare' and carry .gpu-bundle)"
fi

# --- CUDA unit tests
copy_gbps=""
if [[ -n "$test_cuda" ]]; then
  t0=$SECONDS
  tests_out="$work/test_cuda.out"
  run_to "$tests_out" 150 env "${qenv[@]}" "$test_cuda" --gtest_output=xml:"$out/test_cuda.xml"
  rc=$?
  passed="$(grep -Eo '\[  PASSED  \] [0-9]+' "$tests_out" | tail -1 | grep -Eo '[0-9]+$')"
  skipped="$(grep -Eo '\[  SKIPPED \] [0-9]+ test' "$tests_out" | grep -Eo '[0-9]+' | head -1)"
  failures="$(grep -Eo '\[  FAILED  \] [0-9]+ test' "$tests_out" | grep -Eo '[0-9]+' | head -1)"
  copy_gbps="$(grep -Eo 'copy_bandwidth_gbps=[0-9.]+' "$tests_out" | tail -1 | cut -d= -f2)"
  value="${passed:-0} passed, ${failures:-0} failed, ${skipped:-0} skipped, $((SECONDS - t0)) s"
  if ((rc == 0)) && [[ -z "${skipped:-}" || "$skipped" == 0 || $allow_skips == 1 ]]; then
    row "cuda unit tests" ok "$value"
  else
    row "cuda unit tests" FAIL "$value (rc $rc; a skip means no device was usable)"
  fi
  # Side-by-side kernel timings (tests/unit/cuda/kernel_timing_device_test.cpp): the new
  # kernel against the path it replaced, on the same inputs, after checking they agree.
  while IFS= read -r line; do
    row "time ${line%%:*}" ok "${line#*: }"
  done < <(grep -E '^kernel_time ' "$tests_out" | sed 's/^kernel_time //')
  if [[ -n "$copy_gbps" ]]; then
    row "device copy bandwidth" ok "$copy_gbps GB/s (read + write)"
  elif ((allow_skips)); then
    row "device copy bandwidth" -- "no device"
  else
    row "device copy bandwidth" FAIL "not measured"
  fi
fi

# --- models (the tokenizer folder is carried; the copy of the repo has no .cache)
tok="$repo/.cache/qwen-tokenizer"
models_ok=0
if [[ -n "$qmpi" ]]; then
  if [[ -s "$tok/tokenizer.json" && -s "$tok/tokenizer_config.json" ]]; then
    if run 60 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model --out "$work/tiny" \
         --preset tiny --dtype bf16 &&
       run 90 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model --out "$work/q05" \
         --preset qwen2.5-0.5b --dtype bf16 &&
       run 60 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model --out "$work/tiny-qwen3" \
         --preset tiny-qwen3 --dtype bf16 &&
       run 60 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model \
         --out "$work/tiny-qwen2-moe" --preset tiny-qwen2-moe --dtype bf16 &&
       run 60 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model \
         --out "$work/tiny-qwen3-moe" --preset tiny-qwen3-moe --dtype bf16 &&
       run 60 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model --out "$work/tiny-gptq" \
         --preset tiny --quant gptq --group-size 64 --desc-act &&
       run 90 env QMPI_TOKENIZER_DIR="$tok" "${qenv[@]}" "$qmpi" make-model --out "$work/q05-awq" \
         --preset qwen2.5-0.5b --quant awq --group-size 128; then
      models_ok=1
    else
      row "make-model" FAIL "see log"
    fi
  else
    row "make-model" FAIL "no tokenizer: carry .cache/qwen-tokenizer"
  fi
fi

same_tokens() {  # same_tokens GOT.jsonl WANT.jsonl WHAT -> "8/8 requests with the WHAT tokens"
  # Two `batch --token-ids` outputs of the same 8 requests; status 1 unless every request's
  # token ids are equal.
  "$py" - "$@" <<'PY'
import json, sys
def ids(p):
    return {json.loads(l)["custom_id"]: json.loads(l)["response"]["body"]["choices"][0]["token_ids"]
            for l in open(p)}
a, b = ids(sys.argv[1]), ids(sys.argv[2])
same = sum(a[k] == b.get(k) for k in a)
print(f"{same}/{len(a)} requests with the {sys.argv[3]} tokens ({sum(map(len, a.values()))} tokens)")
sys.exit(0 if same == len(a) == 8 else 1)
PY
}

compare() {  # compare GOT.npy WANT.npy TOL -> "rel .., top-1 ../.."; status 1 above TOL
  [[ -n "$py" ]] || { echo "no python3 with numpy"; return 1; }
  "$py" - "$@" <<'PY'
import sys
import numpy as np
got, want, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
if got.shape != want.shape:
    print(f"shape {got.shape} vs {want.shape}")
    sys.exit(1)
if not np.isfinite(got).all():
    print("non-finite logits")
    sys.exit(1)
got, want = got.astype(np.float64), want.astype(np.float64)
rel = np.linalg.norm(got - want) / np.linalg.norm(want)
top1 = int((got.argmax(-1) == want.argmax(-1)).sum())
print(f"rel {rel:.1e}, top-1 {top1}/{got.shape[0]}")
sys.exit(0 if rel < tol else 1)
PY
}

# Whole-model logits: every GEMM rounds its input to bf16 on the GPU (about 1e-3 each) while
# the CPU backend multiplies in float32, so the end-to-end bound is looser than a kernel's.
logits_tol=3e-2
ids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
if ((models_ok)) && [[ -n "$py" ]]; then
  # The Qwen3 model adds the per-head q/k RMSNorm; the MoE models the router copy, gathered
  # expert GEMMs and scatter_add_rows (experts and the shared expert).
  for m in tiny q05 tiny-qwen3 tiny-qwen2-moe tiny-qwen3-moe tiny-gptq q05-awq; do
    case $m in
      q05) name=qwen2.5-0.5b ;;
      tiny-gptq) name="tiny int4 gptq act-order g64" ;;
      q05-awq) name="qwen2.5-0.5b int4 awq g128" ;;
      *) name=$m ;;
    esac
    if run 90 env "${qenv[@]}" "$qmpi" logits --model "$work/$m" --ids "$ids" \
         --out "$work/$m.cpu.npy" --backend cpu &&
       run 90 env "${qenv[@]}" "$qmpi" logits --model "$work/$m" --ids "$ids" \
         --out "$work/$m.$backend.npy" --backend "$backend"; then
      if value="$(compare "$work/$m.$backend.npy" "$work/$m.cpu.npy" "$logits_tol")"; then
        row "logits $name $backend vs cpu" ok "$value"
      else
        row "logits $name $backend vs cpu" FAIL "$value (bound $logits_tol)"
      fi
    else
      row "logits $name $backend vs cpu" FAIL "qmpi logits failed: see log"
    fi
  done
  # The rows above use the default bf16 KV cache on both backends; f32 and fp8 (e4m3, a scale
  # per token and KV head) store bit-identical K/V on both too, so the same bound applies.
  for kv in f32 fp8; do
    if run 90 env "${qenv[@]}" "$qmpi" logits --model "$work/q05" --ids "$ids" --kv-dtype "$kv" \
         --out "$work/q05.kv-$kv.cpu.npy" --backend cpu &&
       run 90 env "${qenv[@]}" "$qmpi" logits --model "$work/q05" --ids "$ids" --kv-dtype "$kv" \
         --out "$work/q05.kv-$kv.$backend.npy" --backend "$backend"; then
      if value="$(compare "$work/q05.kv-$kv.$backend.npy" "$work/q05.kv-$kv.cpu.npy" "$logits_tol")"; then
        row "logits qwen2.5-0.5b $kv KV $backend vs cpu" ok "$value"
      else
        row "logits qwen2.5-0.5b $kv KV $backend vs cpu" FAIL "$value (bound $logits_tol)"
      fi
    else
      row "logits qwen2.5-0.5b $kv KV $backend vs cpu" FAIL "qmpi logits failed: see log"
    fi
  done

  # The whole distributed path on one GPU: six ranks share it, TP staged through host memory.
  # CUDA_VISIBLE_DEVICES lets the ranks share the listed GPU round-robin (--comm mpi).
  log_before=$(wc -l <"$log")
  if run 150 env "${qenv[@]}" OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
       "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 6 "$qmpi" logits --model "$work/q05" --ids "$ids" \
       --out "$work/q05.tp2pp3.npy" --tp 2 --pp 3 --backend "$backend" --comm mpi; then
    if value="$(compare "$work/q05.tp2pp3.npy" "$work/q05.cpu.npy" "$logits_tol")"; then
      row "6 ranks tp2 pp3 --comm mpi vs cpu" ok "$value"
    else
      row "6 ranks tp2 pp3 --comm mpi vs cpu" FAIL "$value (bound $logits_tol)"
    fi
  else
    row "6 ranks tp2 pp3 --comm mpi vs cpu" FAIL "mpirun failed: see log"
  fi
  # Every rank prints the planner's memory prediction next to what it measured; on a GPU the
  # KV cache was sized from --gpu-memory-utilization (each rank 1/6 of the device).
  mem_lines="$(tail -n +"$((log_before + 1))" "$log" | grep 'memory predicted / actual')"
  mem_count="$(grep -c . <<<"$mem_lines")"
  mem_device="$(grep -c 'free before the KV cache' <<<"$mem_lines")"
  mem_rank0="$(grep '\[rank 0 ' <<<"$mem_lines" | grep -Eo 'workspace [^(]*[^( ]|KV cache .* blocks' | paste -sd';' | sed 's/;/; /')"
  if [[ "$mem_count" == 6 && ( "$backend" == cpu || "$mem_device" == 6 ) ]]; then
    row "memory predicted / actual, 6 ranks" ok "rank 0: ${mem_rank0:-?}"
  else
    row "memory predicted / actual, 6 ranks" FAIL "$mem_count lines, $mem_device with device numbers (want 6)"
  fi

  # TP 3 divides nothing on qwen2.5-0.5b (14 heads, 2 KV heads): 5,5,4 query heads, and the
  # middle rank holds both KV heads, so the CUDA attention kernel runs an uneven head map.
  if run 120 env "${qenv[@]}" OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
       "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 3 "$qmpi" logits --model "$work/q05" --ids "$ids" \
       --out "$work/q05.tp3.npy" --tp 3 --pp 1 --backend "$backend" --comm mpi; then
    if value="$(compare "$work/q05.tp3.npy" "$work/q05.cpu.npy" "$logits_tol")"; then
      row "3 ranks tp3 (uneven heads) --comm mpi vs cpu" ok "$value"
    else
      row "3 ranks tp3 (uneven heads) --comm mpi vs cpu" FAIL "$value (bound $logits_tol)"
    fi
  else
    row "3 ranks tp3 (uneven heads) --comm mpi vs cpu" FAIL "mpirun failed: see log"
  fi

  # Two TP 3 replicas (--dp 2) on 6 ranks sharing the GPU: every request of a small batch gets
  # the tokens of the same batch on one rank (the replica changes no token).
  "$py" -c '
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(json.dumps({"id": f"r{i}", "prompt": [1 + i, 2, 3, 4, 5 + i], "max_tokens": 8,
                            "temperature": 0, "ignore_eos": True}) + "\n")' "$work/dp.jsonl"
  if run 120 env "${qenv[@]}" "$qmpi" batch --model "$work/q05" --input "$work/dp.jsonl" \
       --output "$work/dp.1x1.jsonl" --overwrite --token-ids --backend "$backend" &&
     run 180 env "${qenv[@]}" OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
       "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 6 "$qmpi" batch --model "$work/q05" \
       --input "$work/dp.jsonl" --output "$work/dp.dp2tp3.jsonl" --overwrite --token-ids --dp 2 --tp 3 \
       --backend "$backend" --comm mpi; then
    if value="$(same_tokens "$work/dp.dp2tp3.jsonl" "$work/dp.1x1.jsonl" 1-rank)"; then
      row "6 ranks dp2 tp3 --comm mpi batch vs 1 rank" ok "$value"
    else
      row "6 ranks dp2 tp3 --comm mpi batch vs 1 rank" FAIL "$value"
    fi
  else
    row "6 ranks dp2 tp3 --comm mpi batch vs 1 rank" FAIL "a batch run failed: see log"
  fi

  # CUDA graphs (--cuda-graphs): a greedy batch whose requests end one after another (decode
  # batches of 8 sequences down to 1, each size recorded and replayed) gives the tokens it gives
  # without graphs. The contexts stay under the first graph context bound (256), where recorded
  # and eager steps launch the same kernels, so the tokens must be equal, not just close.
  graphs_flag=()
  [[ "$backend" == cuda ]] && graphs_flag=(--cuda-graphs)
  "$py" -c '
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(json.dumps({"id": f"g{i}", "prompt": [3 + i, 5, 7, 11 + i], "max_tokens": 12 + 8 * i,
                            "temperature": 0, "ignore_eos": True}) + "\n")' "$work/graphs.jsonl"
  if run 90 env "${qenv[@]}" "$qmpi" batch --model "$work/q05" --input "$work/graphs.jsonl" \
       --output "$work/graphs.eager.jsonl" --overwrite --token-ids --backend "$backend" &&
     run 90 env "${qenv[@]}" "$qmpi" batch --model "$work/q05" --input "$work/graphs.jsonl" \
       --output "$work/graphs.graphs.jsonl" --overwrite --token-ids --backend "$backend" \
       "${graphs_flag[@]}"; then
    if value="$(same_tokens "$work/graphs.graphs.jsonl" "$work/graphs.eager.jsonl" eager)"; then
      row "--cuda-graphs batch vs eager" ok "$value"
    else
      row "--cuda-graphs batch vs eager" FAIL "$value"
    fi
  else
    row "--cuda-graphs batch vs eager" FAIL "a batch run failed: see log"
  fi

  # Speed: one sequence, 128-token prompt, 64 generated tokens.
  if run_to "$work/bench.out" 150 env "${qenv[@]}" "$qmpi" bench --model "$work/q05" \
       --backend "$backend" --prompt-len 128 --gen-len 64 --json --no-membw &&
     grep '^{' "$work/bench.out" | tail -1 >"$out/bench.json" && [[ -s "$out/bench.json" ]]; then
    read -r decode prefill wbytes < <("$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["decode_tokens_per_s"], j["prefill_tokens_per_s"], j["weight_bytes_rank0"])' "$out/bench.json")
    if [[ -n "$copy_gbps" && -n "${wbytes:-}" ]]; then
      roof="$("$py" -c "print(f'{$copy_gbps * 1e9 / $wbytes:.0f}')")"
      pct="$("$py" -c "print(f'{100 * $decode * $wbytes / ($copy_gbps * 1e9):.0f}')")"
      row "decode qwen2.5-0.5b $backend" ok "$(printf '%.0f' "$decode") tok/s = $pct% of roofline $roof tok/s ($((wbytes / 1000000)) MB/token)"
    else
      row "decode qwen2.5-0.5b $backend" ok "$(printf '%.0f' "$decode") tok/s (no roofline: copy bandwidth missing)"
    fi
    row "prefill qwen2.5-0.5b $backend, 128 tok" ok "$(printf '%.0f' "$prefill") tok/s"
  else
    row "bench qwen2.5-0.5b" FAIL "qmpi bench failed: see log"
  fi

  # The same bench with decode steps replayed as CUDA graphs (the eager run above is the base).
  if run_to "$work/bench-graphs.out" 150 env "${qenv[@]}" "$qmpi" bench --model "$work/q05" \
       --backend "$backend" --prompt-len 128 --gen-len 64 --json --no-membw "${graphs_flag[@]}" &&
     grep '^{' "$work/bench-graphs.out" | tail -1 >"$out/bench-graphs.json" &&
     [[ -s "$out/bench-graphs.json" && -s "$out/bench.json" ]]; then
    value="$("$py" -c '
import json, sys
g, e = (json.load(open(p))["decode_tokens_per_s"] for p in sys.argv[1:3])
print(f"{g:.0f} tok/s with graphs, {e:.0f} without: {g / e:.2f}x")' "$out/bench-graphs.json" "$out/bench.json")"
    row "decode qwen2.5-0.5b $backend --cuda-graphs" ok "$value"
  else
    row "bench qwen2.5-0.5b --cuda-graphs" FAIL "qmpi bench failed: see log"
  fi

  # Speculative decoding: a step checking 4 guesses per sequence against a plain decode step,
  # at batch 1 and 8 (both read the weights once).
  spec='{"method": "ngram", "num_speculative_tokens": 4}'
  if run_to "$work/bench-spec.out" 150 env "${qenv[@]}" "$qmpi" bench --model "$work/q05" \
       --backend "$backend" --prompt-len 128 --gen-len 32 --batch 8 --json --no-membw \
       --speculative-config "$spec" &&
     grep '^{' "$work/bench-spec.out" | tail -1 >"$out/bench-spec.json" && [[ -s "$out/bench-spec.json" ]]; then
    value="$("$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
a, b = j["verify_vs_decode_step"], j["batch_verify_vs_batch_step"]
u = j["spec_upper_bound_tokens_per_s"]
print(f"{a:.2f}x a decode step at batch 1, {b:.2f}x at batch 8; every guess accepted: {u:.0f} tok/s")' \
      "$out/bench-spec.json")"
    row "speculation k=4 qwen2.5-0.5b $backend" ok "$value"
  else
    row "bench --speculative-config" FAIL "qmpi bench failed: see log"
  fi

  # int4 (AWQ g128) decode and prefill on the same shape: the int4 GEMV streams ~0.52 bytes
  # per weight instead of 2.
  if run_to "$work/bench-awq.out" 150 env "${qenv[@]}" "$qmpi" bench --model "$work/q05-awq" \
       --backend "$backend" --prompt-len 128 --gen-len 64 --json --no-membw &&
     grep '^{' "$work/bench-awq.out" | tail -1 >"$out/bench-awq.json" && [[ -s "$out/bench-awq.json" ]]; then
    read -r decode prefill wbytes < <("$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["decode_tokens_per_s"], j["prefill_tokens_per_s"], j["weight_bytes_rank0"])' "$out/bench-awq.json")
    row "decode qwen2.5-0.5b int4 awq $backend" ok "$(printf '%.0f' "$decode") tok/s ($((wbytes / 1000000)) MB/token)"
    row "prefill qwen2.5-0.5b int4 awq $backend, 128 tok" ok "$(printf '%.0f' "$prefill") tok/s"
  else
    row "bench qwen2.5-0.5b int4 awq" FAIL "qmpi bench failed: see log"
  fi
fi

{
  echo
  echo "qmpi gpu_check $(date -u '+%Y-%m-%d %H:%M UTC'), $SECONDS s"
  printf '%-36s %-5s %s\n' check result value
  for r in "${rows[@]}"; do
    IFS='|' read -r a b c <<<"$r"
    printf '%-36s %-5s %s\n' "$a" "$b" "$c"
  done
} | tee "$out/summary.txt" | tee -a "$log"
exit $failed
