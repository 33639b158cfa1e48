#!/usr/bin/env bash
# Re-runs every GPU figure published in docs/performance.md, on a machine with an NVIDIA GPU, and writes the evidence.
#
#   npm run gpu:verify                      # 3 rounds, full sizes (copies and transfers took about 5 minutes on one
#                                           # H200; the memory rows, added since, have not been timed on a GPU yet)
#   npm run gpu:verify -- --rounds 5 --out /tmp/evidence
#   npm run gpu:verify -- --quick           # 1 round, 256 MiB transfers (a smoke test; not for publishing)
#   npm run gpu:verify -- --plan-accuracy   # also the planner against PyTorch's measured peaks (needs transformers; ~15 min)
#   npm run gpu:verify -- --only transfer --parts many,first,file  # some parts of the transfer group (first, shapes,
#                                           # many, file, host, batch, chain; default all)
#   npm run gpu:verify -- --only copy,memory --evidence DIR   # some groups, into another folder (to split the work
#                                           # across calls on machines that limit a command's time; run compare.mjs
#                                           # on the folder afterwards). Groups: copy, memory, transfer, collectives,
#                                           # plan (with --plan-set base|variety|all, default all), stacks (FSDP1/2 on
#                                           # one GPU, expandable segments, peft's kbit preparation, generate's reserved)
#
# Each round runs the native CUDA C programs of benchmarks/native/ and gpumem, interleaved, then PyTorch where it is
# installed: copies (native bandwidth.cu against `gpumem bench --only copy`), transfers (native transfer.cu
# against `gpumem bench --only transfer`, PyTorch's own ways beside them) and every row with a kernel or an
# allocation (native memory.cu, built on the kernels gpumem compiles, against the same groups of `gpumem bench`). benchmarks/compare.mjs turns the files
# into the tables; they go to docs/evidence/DATE-MACHINE/ with every raw file, and into docs/performance.md
# between its gpu-verify markers. With --out, the same files are also copied to that folder.
#
# Needs: nvcc, an NVIDIA driver, Node.js 20 (or the bundle of ../shared/device/bundle.sh in .gpu/), a built gpumem.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=3
out=""
quick=0
only="copy,memory,transfer,collectives"
plan_set=all
evidence=""
parts=all
while [ $# -gt 0 ]; do
  case "$1" in
    --plan-accuracy) only="$only,plan"; shift ;;
    --plan-set) plan_set=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --evidence) evidence=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; rounds=1; shift ;;
    *) echo "gpu-verify: unknown option $1" >&2; exit 2 ;;
  esac
done
for g in ${only//,/ }; do
  case "$g" in copy|memory|transfer|collectives|plan|stacks) ;; *) echo "gpu-verify: unknown group $g (copy, memory, transfer, collectives, plan, stacks)" >&2; exit 2 ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
all_parts=${parts/all/first,shapes,many,file,host,batch,chain}
# Per round, the transfer parts each program runs: "first" (fresh processes: 3 of each program, 6 of gpumem's) and
# "file" (a 1 GiB file written and read cold: the disk's time) run in round 1 only, so that three rounds of the whole
# group stay within one 10-minute command; the other parts run every round.
parts_of_round() {
  local out=$all_parts
  [ "$1" -gt 1 ] && out=$(echo "$out" | tr , '\n' | { grep -v -e '^first$' -e '^file$' || true; } | paste -sd, -)
  echo "$out"
}
steady_of() { echo "$1" | tr , '\n' | { grep -v '^first$' || true; } | paste -sd, -; }

# Node.js and a built gpumem: this checkout, or the bundle that carries both to machines without Node.js.
node_bin=$(command -v node || true)
app="$root"
if [ ! -d "$root/node_modules" ] || [ ! -f "$root/dist/cli.js" ]; then
  if [ -f "$root/.gpu/app/dist/cli.js" ]; then app="$root/.gpu/app"; else echo "gpu-verify: build gpumem first (npm run build)" >&2; exit 2; fi
fi
if [ -z "$node_bin" ]; then
  if [ -f "$root/.gpu/node.xz" ]; then
    mkdir -p /tmp/gpumem-node
    [ -x /tmp/gpumem-node/node ] || { xz -dc "$root/.gpu/node.xz" > /tmp/gpumem-node/node && chmod +x /tmp/gpumem-node/node; }
    node_bin=/tmp/gpumem-node/node
  else
    echo "gpu-verify: no Node.js (install Node.js 20, or run ../shared/device/bundle.sh)" >&2; exit 2
  fi
fi
gpumem() { (cd "$app" && "$node_bin" dist/cli.js "$@"); }

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
count=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
slug=$(echo "${count}x-${gpu}" | tr '[:upper:]' '[:lower:]' | sed 's/nvidia //; s/[^a-z0-9]\+/-/g; s/-$//')
date=$(date -u +%F)
ev="$root/docs/evidence/${date}-${slug}"
[ "$quick" = 1 ] && ev="${out:-/tmp}/gpu-verify-quick"
[ -n "$evidence" ] && ev="$evidence"
mkdir -p "$ev"
echo "gpu-verify: ${count} x ${gpu} (sm_${cc}), ${rounds} round(s) of ${only}, evidence in ${ev}" >&2

bin=/tmp/gpumem-native
mkdir -p "$bin"
if want copy; then nvcc -O2 -arch="sm_${cc}" -o "$bin/bandwidth" benchmarks/native/bandwidth.cu; fi
if want transfer; then
  # cuFile rows where GPUDirect Storage's library and header are installed (they run in compatibility mode without
  # the nvidia-fs driver, and say so).
  cufile=()
  for inc in /usr/local/cuda/include /usr/include; do
    # (grep reads all of ldconfig's output: grep -q would end the pipe early, and pipefail would call it a failure)
    if [ -f "$inc/cufile.h" ] && ldconfig -p 2>/dev/null | grep libcufile.so > /dev/null; then cufile=(-DHAVE_CUFILE -lcufile); break; fi
  done
  nvcc -O2 -arch="sm_${cc}" -Xcompiler -fopenmp "${cufile[@]}" -o "$bin/transfer" benchmarks/native/transfer.cu
  nvcc -O2 -arch="sm_${cc}" -o "$bin/pinning" benchmarks/native/pinning.cu
fi
if want memory; then
  # memory.cu runs the very kernels gpumem compiles: their text comes out of the built package.
  "$node_bin" -e 'import(process.argv[1]).then((m) => process.stdout.write(m.BENCH_KERNELS.source))' "$app/dist/kernels/bench-kernels.js" > "$bin/bench-kernels.cuh"
  nvcc -O2 -arch="sm_${cc}" -I"$bin" -o "$bin/memory" benchmarks/native/memory.cu
fi
# Collectives need two GPUs; their yardstick is native-collectives.cu from the shared reference (in .gpu/ on the
# device machines, ../shared/reference/ beside a checkout), built against the system's NCCL.
collectives=0
if [ "$count" -ge 2 ] && want collectives; then
  for f in "$root/.gpu/native-collectives.cu" "$root/../shared/reference/native-collectives.cu"; do
    if [ -f "$f" ] && nvcc -O2 -arch="sm_${cc}" -o "$bin/collectives" "$f" -lnccl; then collectives=1; break; fi
  done
  [ "$collectives" = 1 ] || echo "gpu-verify: no native-collectives.cu or no NCCL to build it with: collectives left out" >&2
fi

# One block per call: groups run in separate calls may land on different machines of the same kind.
{
  [ -s "$ev/machine.txt" ] && echo "---"
  echo "date: $(date -u +%FT%TZ)"
  echo "groups: ${only}; rounds: ${rounds}"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,memory.total --format=csv
  echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l) NUMA node(s)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "node: $("$node_bin" --version); nvcc: $(nvcc --version | tail -1)"
  echo "gpumem: ${GPUMEM_COMMIT:-$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)}"
} >> "$ev/machine.txt"
gpumem info --json > "$ev/info.json"

transfer_bytes=$((1 << 30)); copy_max=1GiB; mode=""; memory_bytes=$((1 << 30))
if [ "$quick" = 1 ]; then transfer_bytes=$((256 << 20)); copy_max=256MiB; mode="--quick"; memory_bytes=$((256 << 20)); fi
# Every bench group with a kernel or an allocation; the SM copies come with the copy run (--only copy sm-copy).
memory_tests=stream,cache,access,latency,managed,zero-copy,alloc
has_torch=0
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && has_torch=1
for r in $(seq 1 "$rounds"); do
  echo "gpu-verify: round $r of $rounds" >&2
  round_parts=$(parts_of_round "$r")
  steady_parts=$(steady_of "$round_parts")
  if want copy; then
    "$bin/bandwidth" > "$ev/native-bandwidth-$r.jsonl"
    gpumem bench --backend cuda --only copy sm-copy --max-size "$copy_max" --json > "$ev/gpumem-copy-$r.json"
  fi
  if want transfer; then
    : > "$ev/native-transfer-$r.jsonl"
    [ -n "$steady_parts" ] && "$bin/transfer" "$transfer_bytes" 5 "$steady_parts" >> "$ev/native-transfer-$r.jsonl"
  fi
  if want memory; then
    "$bin/memory" "$memory_bytes" "$memory_tests,sm-copy" > "$ev/native-memory-$r.jsonl"
    gpumem bench --backend cuda --only $(echo "$memory_tests" | tr , ' ') --max-size "$((memory_bytes / 1048576))MiB" --json > "$ev/gpumem-memory-$r.json"
  fi
  if want transfer; then
    GPUMEM_TRANSFER_PARTS=$round_parts \
      gpumem bench --backend cuda --only transfer $mode --max-size "$((transfer_bytes / 1048576))MiB" --json > "$ev/gpumem-transfer-$r.json"
  fi
  if [ "$collectives" = 1 ]; then
    "$bin/collectives" > "$ev/native-collectives-$r.txt"
    gpumem bench --backend cuda --only collectives --json > "$ev/gpumem-collectives-$r.json"
  fi
  if [ "$has_torch" = 1 ] && want transfer; then
    : > "$ev/torch-transfer-$r.jsonl"
    [ -n "$steady_parts" ] && python3 benchmarks/pytorch/transfer.py "$transfer_bytes" 5 "$steady_parts" >> "$ev/torch-transfer-$r.jsonl"
  fi
  if want transfer && [[ ",$round_parts," == *",first,"* ]]; then
    # The first upload of a fresh process, three processes each (gpumem's come from its bench, above).
    # What pinning costs here, the floor under every first staged upload.
    "$bin/pinning" > "$ev/native-pinning-$r.jsonl"
    for i in 1 2 3; do
      "$bin/transfer" "$transfer_bytes" 1 first >> "$ev/native-transfer-$r.jsonl"
      [ "$has_torch" = 1 ] && python3 benchmarks/pytorch/transfer.py "$transfer_bytes" 1 first >> "$ev/torch-transfer-$r.jsonl"
    done
  fi
  if want transfer && [[ ",$round_parts," == *",file,"* ]]; then
    # What the disk itself reads with the page cache bypassed, for the cold file rows.
    f="${GPUMEM_BENCH_DIR:-/tmp}/gpumem-dd.bin"
    dd if=/dev/zero of="$f" bs=4M count=$((transfer_bytes / 4194304)) oflag=direct status=none 2>/dev/null || dd if=/dev/zero of="$f" bs=4M count=$((transfer_bytes / 4194304)) status=none
    sync
    dd if="$f" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1 | sed 's/^/dd iflag=direct: /' > "$ev/disk-$r.txt" || true
    rm -f "$f"
  fi
done

if want plan; then
  python3 benchmarks/pytorch/record_training_peaks.py --set "$plan_set" > "$ev/measured-peaks.json"
  GPUMEM_DIST="$app/dist" "$node_bin" tools/plan-accuracy.mjs "$ev/measured-peaks.json" > "$ev/plan-accuracy.md"
fi
if want stacks; then
  # the allocator reads PYTORCH_CUDA_ALLOC_CONF when CUDA starts: one process per setting
  for conf in "" "expandable_segments:True"; do
    name=stacks-${conf:+expandable}; name=${name%-}
    (cd benchmarks/pytorch && python3 record_stack_peaks.py --out "$ev/$name.json" ${conf:+--alloc-conf "$conf"}) || true
    [ -f "$ev/$name.json" ] && GPUMEM_DIST="$app/dist" "$node_bin" tools/plan-accuracy.mjs "$ev/$name.json" > "$ev/$name-accuracy.md" || true
  done
  # the same runs sharing one process, as recorded before 2026-12-03: each row's details.before shows what earlier runs left
  (cd benchmarks/pytorch && python3 record_stack_peaks.py --in-process --out "$ev/stacks-in-process.json") || true
fi
"$node_bin" benchmarks/compare.mjs "$ev" > "$ev/tables.md"
if [ "$quick" = 0 ]; then "$node_bin" benchmarks/compare.mjs "$ev" --update docs/performance.md; fi
if [ -n "$out" ] && [ "$out" != "$ev" ]; then mkdir -p "$out" && cp "$ev"/* "$out"/; fi
cat "$ev/tables.md"
