#!/usr/bin/env bash
# What `gpumem monitor` reports under load, beside what nvidia-smi reports at the same time: device UUIDs, memory
# used, utilisation and PCIe throughput, from `monitor --json` and from the Prometheus endpoint of `monitor --serve`.
#
#   bash benchmarks/monitor-vs-smi.sh OUT_DIR [SECONDS]        # default 40 s of load; a built gpumem (npm run build)
#   bash .gpu/run.sh bash "$PWD/benchmarks/monitor-vs-smi.sh" "$OUT/monitor" 40   # on a GPU machine, from the
#                                       # checkout, with the bundle of ../shared/device/bundle.sh (its built gpumem is used)
#
# The load: benchmarks/monitor-load.mjs's steady copies, idle / host-to-device / device-to-host / idle, 10 s each
# (GPUMEM_MONITOR_PHASE_SECONDS), then gpumem's own bench (copies and STREAM kernels, so the GPU is busy) in a loop for
# SECONDS. Beside it, once a second: `gpumem monitor --json`, `nvidia-smi --query-gpu=...` and `nvidia-smi dmon -s ut`
# (PCIe rx/tx, utilisation), and a scrape of /metrics. benchmarks/monitor-compare.mjs then pairs the samples by time
# and writes OUT_DIR/comparison.md (also printed): what matched and by how much. Where nvidia-smi is absent (the
# host backend), the gpumem side is still recorded and the comparison says there was nothing to compare with.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: monitor-vs-smi.sh OUT_DIR [SECONDS]}
seconds=${2:-40}
mkdir -p "$out"
cd "$root"
# the bundle's built gpumem where there is one (.gpu/app: dist and its production node_modules), else the checkout's
cli="node dist/cli.js"
if [ -f "$root/.gpu/app/dist/cli.js" ]; then cli="node $root/.gpu/app/dist/cli.js"; export GPUMEM_DIST="$root/.gpu/app/dist"; fi
port=${GPUMEM_MONITOR_PORT:-19464}
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap stop EXIT

smi=0
command -v nvidia-smi >/dev/null && smi=1
echo "{\"date\":\"$(date -u +%FT%TZ)\",\"host\":\"$(hostname)\",\"seconds\":$seconds,\"nvidiaSmi\":$smi}" > "$out/run.json"
if [ $smi = 1 ]; then
  nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,memory.used,memory.total,pcie.link.gen.current,pcie.link.width.current \
    --format=csv,nounits -l 1 > "$out/smi-query.csv" 2> "$out/smi-query.err" &
  pids+=($!)
  nvidia-smi dmon -s ut -d 1 -o T > "$out/smi-dmon.txt" 2> "$out/smi-dmon.err" &
  pids+=($!)
fi
$cli monitor --json --interval 1 > "$out/monitor.jsonl" 2> "$out/monitor.err" &
pids+=($!)
$cli monitor --serve --port "$port" > "$out/serve.out" 2> "$out/serve.err" &
pids+=($!)
sleep 2

# the load, and a scrape of /metrics every second beside it: first steady copies one direction at a time (PCIe,
# compared phase by phase), then gpumem's bench in a loop (kernels, so the GPU is busy: utilisation)
phase=${GPUMEM_MONITOR_PHASE_SECONDS:-10}
end=$((SECONDS + 4 * phase + seconds))
( node benchmarks/monitor-load.mjs "$out/load-phases.json" "$phase" 2>> "$out/load-bench.err"
  while [ $SECONDS -lt $end ]; do $cli bench --quick --only copy stream --max-size 256MiB --json >> "$out/load-bench.jsonl" 2>> "$out/load-bench.err" || break; done ) &
load=$!
pids+=($load)
n=0
while [ $SECONDS -lt $end ]; do
  node -e "fetch('http://127.0.0.1:$port/metrics').then(r=>r.text()).then(t=>process.stdout.write('# scrape '+new Date().toISOString()+'\n'+t)).catch(e=>process.stdout.write('# scrape failed '+e.message+'\n'))" >> "$out/metrics.txt"
  n=$((n + 1))
  sleep 1
done
wait "$load" 2>/dev/null  # the last bench run ends by itself (it frees what it allocated)
sleep 2
stop
trap - EXIT
node benchmarks/monitor-compare.mjs "$out" | tee "$out/comparison.md"
