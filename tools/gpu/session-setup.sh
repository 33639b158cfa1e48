# Sourced by the session scripts: log to $OUT/session.log, unpack Node (PATH), build the native yardstick
# (/tmp/nb), put tools/ beside the bundled app, and point the yardstick's Node port at libcudart (CUDART).
exec > >(tee -a $OUT/session.log) 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/nb .gpu/native-bandwidth.cu
bash .gpu/run.sh true && export PATH=/tmp/gpumem-node:$PATH
rm -rf .gpu/app/tools && cp -r tools .gpu/app/tools
L=/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13; [ -f $L ] && export CUDART=$L
