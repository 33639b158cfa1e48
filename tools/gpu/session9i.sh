#!/usr/bin/env bash
# Session 9, ninth call: gpumem monitor on the H200 against nvidia-smi, with a PyTorch process holding 10 GiB; the
# memory conformance suite on cuda (its memoryUse case); info with NVML's line.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
source tools/gpu/hold-10gib.sh 90
echo "== nvidia-smi"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free --format=csv
cd .gpu/app
echo "== monitor --once"; timeout -s KILL 30 node dist/cli.js monitor --once
timeout -s KILL 30 node dist/cli.js monitor --once --json > $OUT/monitor.json; echo "json rc=$?"
echo "== monitor --prometheus"; timeout -s KILL 30 node dist/cli.js monitor --once --prometheus | tee $OUT/metrics.txt | grep -v "^#" | head -20
(timeout -s KILL 20 node dist/cli.js monitor --serve --port 9464 --interval 0.5 > /tmp/serve.txt 2>&1 &); sleep 3; cat /tmp/serve.txt
curl -s localhost:9464/metrics | grep -E "process_memory|device_memory_used"; curl -s localhost:9464/api/history | head -c 300; echo
pkill -INT -f "monitor --serve"; sleep 1
echo "== info"; timeout -s KILL 30 node dist/cli.js info | head -8
timeout -s KILL 150 node --test --test-reporter=spec dist/memory/memory.conformance.test.js > $OUT/conformance.txt 2>&1; echo "conformance rc=$?"; grep -E "memoryUse|^ℹ (tests|pass|fail)|✖" $OUT/conformance.txt
