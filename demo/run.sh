#!/usr/bin/env bash
# Runs the whole pipeline with zero configuration, for `make run`:
# the demo supplier (bin/mocksupplier) on 127.0.0.1:9100 and actledger
# (API, relay, dispatcher, reconciler) on $LISTEN_ADDR with an embedded
# JetStream and the local Postgres. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

export PROVIDERS_FILE="${PROVIDERS_FILE:-demo/providers.yaml}"
export ACME_WEBHOOK_SECRET="${ACME_WEBHOOK_SECRET:-demo-webhook-secret}"
export LISTEN_ADDR="${LISTEN_ADDR:-127.0.0.1:8080}"

# The supplier sends signed webhooks back to actledger, as real ones do, and
# keeps its orders under ./data beside the embedded JetStream's, so a restart
# still finds the orders the ledger points at (`make clean` removes both).
mkdir -p data
bin/mocksupplier --addr 127.0.0.1:9100 --data data/mocksupplier.jsonl \
  --webhook-url "http://$LISTEN_ADDR/v1/webhooks/acme" --webhook-delay 500ms &
supplier=$!
trap 'kill $supplier 2>/dev/null || true; wait $supplier 2>/dev/null || true' EXIT

cat <<MSG
actledger: API on http://$LISTEN_ADDR, demo supplier on http://127.0.0.1:9100
  the story in one minute:  bin/actledger demo
  tokens:                   bin/actledger token create --tenant demo --role approver|agent|operator
  walk-through:             README.md, "A first operation with curl"
MSG
bin/actledger serve
