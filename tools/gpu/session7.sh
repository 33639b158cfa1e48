#!/usr/bin/env bash
# Seventh GPU session (two H200s, short): peer copies through gpumem after the null-stream fix, and the conformance
# suite on cuda with two devices (its peer case runs). Hard limits on every step.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
cd .gpu/app
timeout -s KILL 60 node dist/cli.js bench --quick --only peer --json > $OUT/peer.json 2> /tmp/p.err; echo "peer rc=$?"; tail -3 /tmp/p.err
timeout -s KILL 60 node dist/cli.js bench --quick --only peer 2>/dev/null | tail -12
timeout -s KILL 90 node --test --test-reporter=spec dist/memory/memory.conformance.test.js 2>&1 | grep -E 'peer|^ℹ|✖' | head -12
timeout -s KILL 20 node dist/cli.js info --json > $OUT/info-x2.json 2>&1
