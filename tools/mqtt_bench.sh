#!/usr/bin/env bash
# MQTT ingest through a real broker, end to end (benches/RESULTS.md, "MQTT
# ingest"): Debian's mosquitto on a loopback port, a release daemon
# subscribed to it with its default subscriptions (sync durability), and
# `telestore load --mqtt` publishing the demo fleet, which returns once
# the daemon has acknowledged every message (rows durable). Two loads:
# 1,000-row line-protocol messages, and one-row JSON messages.
#
#   tools/mqtt_bench.sh [ROUNDS]        (default 3; needs target/release/telestore)
set -euo pipefail
rounds=${1:-3}
bin=target/release/telestore
mosq=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
[ -x "$mosq" ] || { echo "mosquitto is not installed (apt-get install mosquitto)" >&2; exit 1; }
work=$(mktemp -d)
chmod 777 "$work"
port=18830
http=127.0.0.1:17071
cleanup() { kill "${daemon:-}" "${broker:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cat >"$work/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 0
max_inflight_messages 0
CONF
"$mosq" -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
broker=$!
"$bin" serve --dir "$work/data" --listen 127.0.0.1:17070 --http-listen $http \
  --flight-listen off --mqtt mqtt://127.0.0.1:$port >"$work/daemon.log" 2>&1 &
daemon=$!
until curl -sf "http://$http/metrics" | grep -q '^telestore_mqtt_connected 1'; do sleep 0.2; done
sleep 0.5
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) cores, mosquitto $("$mosq" -h | head -1 | awk '{print $3}')"
for r in $(seq "$rounds"); do
  echo "## round $r: line protocol, 1,000-row messages, 4 publishers"
  "$bin" load --mqtt mqtt://127.0.0.1:$port --mqtt-format line --table lp$r \
    --trucks 10000 --duration 30m --batch 1000 --connections 4 --http "http://$http" | grep -E '^sent|made durable'
  echo "## round $r: JSON, one reading per message, 4 publishers"
  "$bin" load --mqtt mqtt://127.0.0.1:$port --mqtt-format json --table js$r \
    --trucks 1000 --duration 20m --batch 1000 --connections 4 --http "http://$http" | grep -E '^sent|made durable'
done
curl -s "http://$http/metrics" | grep -E '^telestore_mqtt_(messages|rows|acked|bad|redeliveries|reconnects)' || true
