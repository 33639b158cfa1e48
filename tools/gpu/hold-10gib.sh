# Sourced by the monitor sessions: a PyTorch process holding a 10 GiB tensor for $1 seconds, started in the
# background; waits until it holds the memory and prints its pid.
python3 -c "
import torch, time, os
x = torch.empty(10 * 2**30, dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
print('holder pid', os.getpid(), flush=True)
time.sleep($1)
" > /tmp/holder.txt 2>&1 &
for i in $(seq 1 60); do grep -q "holder pid" /tmp/holder.txt && break; sleep 0.5; done; cat /tmp/holder.txt
