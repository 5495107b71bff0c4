#!/usr/bin/env bash
# Fleet side by side with the peer job queues, in one run of the shared harness.
#
#   bash bench/run_peers.sh                      # RUNS=3, Fleet + the best peers
#   RUNS=1 SCALE=0.2 bash bench/run_peers.sh     # quick
#   PEERS="fleet dramatiq" bash bench/run_peers.sh
#
# Copies ../shared/bench/peers to $PEERS_DIR (default /tmp/fleet-peers; the
# shared folder is read-only) and adds Fleet rows to its table.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=${PEERS_SRC:-$ROOT/../shared/bench/peers}
DST=${PEERS_DIR:-/tmp/fleet-peers}
[ -d "$DST" ] || cp -r "$SRC" "$DST"
# Fleet's rows run in a virtualenv made as a user's is: `pip install
# fleet-automation` (here the checkout, editable) and uvloop, no extra. The
# project's .venv has the [otel] extra, and redis-py 8 imports the OpenTelemetry
# SDK whenever it is installed (~80 ms of every start); FLEET_BENCH_VENV=.venv
# measures a worker with it.
VENV=${FLEET_BENCH_VENV:-$ROOT/.venv-bench}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -e "$ROOT" uvloop
fi
# An editable install leaves Fleet's modules uncompiled, and with
# PYTHONDONTWRITEBYTECODE set every worker start would compile them again; the
# peers' wheels were byte-compiled by pip. Compile ours once, as pip would.
"$VENV/bin/python" -m compileall -q "$ROOT/fleet" "$ROOT/bench" >/dev/null
export EXTRA_PEER_TABLE="
fleet           $VENV  $ROOT/bench/fleet_bench.py  20000  SLOTS=10,LABEL=fleet
fleet-slots50   $VENV  $ROOT/bench/fleet_bench.py  20000  SLOTS=50,LABEL=fleet-slots50
"
export PEERS=${PEERS:-"fleet fleet-slots50 dramatiq taskiq-stream saq arq-tuned celery-threads rq-simple"}
cd "$DST"
exec bash run_all.sh
