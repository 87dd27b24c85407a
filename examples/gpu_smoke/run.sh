#!/usr/bin/env bash
# On a GPU machine with torch + triton installed and no package index: sign the installed
# Triton, trust the key, and run a kernel through the registry under strict; then flip a byte.
# WHEELS holds cp312 wheels of cryptography, cffi, pycparser, pyelftools (pip download here).
set -e
cd "$(dirname "$0")/../.."
WHEELS=${WHEELS:-.devrun/whl}
HERE=examples/gpu_smoke
OUT=${OUT:-/tmp/gpu_smoke_out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
export PYTHONPATH=/tmp/site:$PWD/runtime:$PWD
rm -rf /tmp/w /tmp/signed /tmp/k /tmp/tsite && mkdir -p /tmp/w /tmp/signed /tmp/k
WHEEL=$(python3 $HERE/repack_installed.py triton /tmp/w)
echo "repacked: $WHEEL $(du -h $WHEEL | cut -f1)"
python3 -m backend_packager keygen -o /tmp/k/platform.pem --comment "gpu platform team"
time python3 -m backend_packager migrate "$WHEEL" -o /tmp/signed --key /tmp/k/platform.pem --jobs 8
python3 -m backend_packager verify /tmp/signed/*.whl --trust /tmp/k/platform.pub
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tsite /tmp/signed/*.whl
export PYTHONPATH=/tmp/tsite:$PYTHONPATH TRITON_BACKEND_TRUSTED_KEYS=/tmp/k/platform.pub
python3 -m triton_backend_runtime hook install
TRITON_BACKEND_POLICY=strict python3 -m triton_backend_runtime doctor | tee $OUT/doctor_strict.txt || true
TRITON_BACKEND_POLICY=strict python3 $HERE/smoke.py 2>$OUT/strict_verified.err | tee $OUT/strict_verified.json
echo "flip one byte in the installed libtriton.so (same size):"
LIB=/tmp/tsite/triton/_C/libtriton.so
python3 -c "import sys; p=sys.argv[1]; f=open(p,'r+b'); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^1]))" $LIB
TRITON_BACKEND_POLICY=strict python3 $HERE/smoke.py 2>$OUT/strict_tampered.err | tee $OUT/strict_tampered.json
python3 -m triton_backend_runtime hook uninstall
