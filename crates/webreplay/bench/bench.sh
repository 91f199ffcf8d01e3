#!/usr/bin/env bash
# Replay-server throughput: requests/s (h2 and HTTP/1.1, small responses, keep-alive),
# new TLS connections/s, and bulk Gbit/s of /bytes/N, measured with h2load
# (apt-get install nghttp2-client) against webreplay on a private loopback address.
# Usage: crates/webreplay/bench/bench.sh [THREADS]   (server worker threads, default 1)
#        WR_ACCESS_LOG=1 ... also writes the JSON-lines access log (measures its cost).
# Client and server share the machine: numbers are a lower bound for the server alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
command -v h2load >/dev/null || { echo "h2load missing: apt-get install nghttp2-client" >&2; exit 2; }
threads=${1:-1}
bin=target/release/webreplay
[ -x "$bin" ] || cargo build --release -p webreplay
tmp=$(mktemp -d)
addr=127.0.99.$((RANDOM % 200 + 20))
port=$((20000 + RANDOM % 20000))
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$tmp/ca.key"
openssl req -x509 -new -key "$tmp/ca.key" -subj "/CN=bench CA" -days 2 -out "$tmp/ca.pem" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
echo "$addr bench.test" > "$tmp/hosts"
"$bin" --hosts "$tmp/hosts" --ca-cert "$tmp/ca.pem" --ca-key "$tmp/ca.key" \
  --http-port 0 --https-port "$port" --threads "$threads" \
  ${WR_ACCESS_LOG:+--access-log "$tmp/access.jsonl"} >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q READY "$tmp/out" && break; sleep 0.05; done
url=https://$addr:$port
run() { # label, h2load args...
  local label=$1; shift
  local out; out=$(h2load "$@" 2>&1)
  local rps; rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s, \([0-9.]*[KMG]*B\)\/s$/\1 req\/s, \2\/s/p' <<<"$out")
  local ok; ok=$(grep -E '^requests:' <<<"$out")
  printf '%-44s %s | %s\n' "$label" "$rps" "$ok"
}
echo "server threads=$threads, access log ${WR_ACCESS_LOG:-off}, h2load 1 thread, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run "h2   /health  c=8 m=32 (keep-alive)"        -n 200000 -c 8 -m 32 -t 1 "$url/health"
run "h2   /bytes/10000 c=8 m=16"                 -n 50000 -c 8 -m 16 -t 1 "$url/bytes/10000"
run "h1.1 /health  c=32 (keep-alive)"           --h1 -n 100000 -c 32 -t 1 "$url/health"
run "h2   new TLS 1.3 connection per request"   -n 3000 -c 3000 -t 1 -r 300 --rate-period=100ms "$url/health"
run "h2   /bytes/100000000 x8, c=4 (bulk)"       -n 8 -c 4 -t 1 "$url/bytes/100000000"
run "h1.1 /bytes/100000000 x8, c=4 (bulk)"       --h1 -n 8 -c 4 -t 1 "$url/bytes/100000000"
