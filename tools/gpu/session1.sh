#!/usr/bin/env bash
# First GPU session: check the core on CUDA (conformance suite, info), probe copies and kernels, and record the
# PyTorch fixtures that plan, analyze and pool replay are checked against. Everything lands in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(pwd)
mkdir -p /tmp/rec
nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current --format=csv 2>&1 | tee $OUT/nvidia-smi.txt
(cd .gpu/app && ls dist | head -3)
bash .gpu/run.sh node dist/cli.js info 2>&1 | tee $OUT/info.txt
bash .gpu/run.sh node dist/cli.js info --json > $OUT/info.json 2>&1
bash .gpu/run.sh node --test --test-reporter=spec dist/memory/memory.conformance.test.js dist/memory/validation.test.js dist/backend/no-device.test.js 2>&1 | tee $OUT/conformance.txt | grep -vE '^\s+✔' | tail -40
timeout 120 bash .gpu/run.sh node $R/tools/gpu/probe.mjs 2>&1 | tee $OUT/probe.txt
timeout 240 python3 tools/gpu/record_training_peaks.py > /tmp/rec/measured-peaks.json 2> /tmp/rec/peaks.log; echo "peaks rc=$?"; tail -3 /tmp/rec/peaks.log
timeout 120 python3 tools/gpu/record_traces.py /tmp/rec 2>&1 | tail -3
timeout 120 python3 tools/gpu/record_snapshot.py /tmp/rec 2>&1 | tail -3
ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/ 2>/dev/null | grep -i -E 'nsys|qdstrm' | head
which nsys; ls /opt/nvidia 2>/dev/null
tar -C /tmp/rec -czf $OUT/recordings.tar.gz .
ls -la /tmp/rec
