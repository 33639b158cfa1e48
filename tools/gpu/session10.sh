#!/usr/bin/env bash
# Session 10, first call, one machine: which step of opening gpumem's cuda backend slows the yardstick's Node port
# (sessions 9k, 9l)? Three rounds; each runs the C yardstick once and the port (64 KiB and 1 MiB only) after each step.
set -uo pipefail
W=/tmp/runs; rm -rf $W; mkdir -p $W
source tools/gpu/session-setup.sh
export GPUMEM_LIBCUDA=/usr/local/nvidia/lib64/libcuda.so.580.159.04
export GPUMEM_LIBNVRTC=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13.0.88
export GPUMEM_LIBNVML=/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04
echo "== where the loader finds libcuda"; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
ldconfig -p | grep -E 'libcuda\.so|libnvidia-ml|libamdhip' ; ls -liL /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* /usr/local/cuda/compat/libcuda.so* 2>&1
(cd .gpu/app && node dist/cli.js info 2>&1 | grep -E 'runtime|driver|compiler|management|hip|cuda') 
VARIANTS="as-c as-c+libcuda as-c+cuinit as-c+nvrtc+nvml as-c+loadcuda as-c+backend as-c+open as-c+auto"
for r in 1 2 3; do
  timeout -s KILL 60 /tmp/nb > $W/native-$r.txt; echo "native $r rc=$?"
  for v in $VARIANTS; do
    (cd .gpu/app && PORT_SIZES=small timeout -s KILL 60 node tools/gpu/native-port.mjs $v > $W/port-$v-$r.txt 2>&1); echo "round $r $v rc=$?"
  done
done
echo "== mapped GPU libraries per variant (round 1)"; grep -H '^# mapped' $W/port-*-1.txt
node tools/gpu/port-to-json.mjs $W/port-*.txt
for v in $VARIANTS; do echo "== $v"; node tools/gpu/compare-native.mjs $W/native-*.txt $W/port-$v-*.json | grep -E "^\| (64 KiB|1 MiB) \| (H2D_pinned|D2H_pinned|D2D)"; done
tar czf $OUT/runs.tgz -C $W .
