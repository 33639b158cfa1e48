#!/usr/bin/env bash
# Session 9, tenth call: gpumem monitor with NVML's memory v2 (the driver's reserved memory apart) against nvidia-smi,
# a PyTorch process holding 10 GiB.
set -uo pipefail
exec > >(tee -a $OUT/session.log) 2>&1
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
source tools/gpu/hold-10gib.sh 60
echo "== nvidia-smi"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,nounits; nvidia-smi --query-gpu=index,name,memory.total,memory.reserved,memory.used,memory.free --format=csv,nounits
cd .gpu/app
echo "== gpumem monitor --once"; timeout -s KILL 30 node dist/cli.js monitor --once | tee $OUT/monitor.txt
timeout -s KILL 30 node dist/cli.js monitor --once --json | tee $OUT/monitor.json
node -e "const s=JSON.parse(require('fs').readFileSync('$OUT/monitor.json','utf8'));const d=s.devices[0];const M=2**20;console.log('MiB: total',d.totalBytes/M,'reserved',d.reservedBytes/M,'used',d.usedBytes/M,'free',d.freeBytes/M, 'processes', JSON.stringify(d.processes.map(p=>[p.pid,p.name,p.usedBytes/M])))"
