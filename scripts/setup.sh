#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root).
#  1. apt packages the lab drives (only the missing ones are installed);
#  2. Rust toolchain components and the release build of the workspace;
#  3. the Python virtualenv at .venv with the pinned lab/requirements.txt.
# When everything is present this takes a few seconds (dpkg query, a no-op
# cargo build, a stamp comparison).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# --- 1. apt -----------------------------------------------------------------
APT_PACKAGES=(
  iproute2 iputils-ping nftables curl ca-certificates openssl
  dnsmasq-base mptcpize chromium libnss3-tools iperf3 jq
  python3-venv build-essential pkg-config
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. Rust ------------------------------------------------------------------
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  log "cargo not found: installing the stable toolchain with rustup"
  if ! command -v rustup >/dev/null 2>&1; then
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi
if [ -n "$(ls crates 2>/dev/null)" ]; then
  log "cargo build --release --workspace"
  cargo build --release --workspace --quiet
fi

# --- 3. Python ----------------------------------------------------------------
REQ="$ROOT/lab/requirements.txt"
STAMP="$ROOT/.venv/.dch-stamp"
want="$(sha256sum "$REQ" "$ROOT/lab/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  log "preparing the Python virtualenv (.venv) from lab/requirements.txt"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -r "$REQ"
  .venv/bin/pip install -q --no-deps -e "$ROOT/lab" >/dev/null
  echo "$want" > "$STAMP"
fi
