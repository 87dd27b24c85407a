#!/usr/bin/env bash
# On a GPU machine whose Triton came preinstalled, with no package index: adopt the installed
# Triton in place (every file checked against its RECORD first), trust the key, install the
# import hook, and run one Triton kernel and one torch.compile function under
# TRITON_BACKEND_POLICY=strict; benchmark the hooked import and cold verification. Then flip
# one byte of the installed libtriton.so and show strict refusing it; the byte is flipped back
# and the hook removed on exit.
# WHEELS holds this project's two wheels (pure Python), and in WHEELS/deps the wheels of
# cryptography (with cffi, pycparser), packaging and cyclonedx-python-lib (the SBOMs, with its
# pure-Python dependencies), used only where they are not installed, and isal (the `fast` extra:
# ISA-L's deflate for adopt -o) where its wheel is there:
#   python -m pip wheel --no-deps -w build/gpu . ./runtime
#   python -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#       -d build/gpu/deps cryptography packaging cyclonedx-python-lib isal
set -uo pipefail
cd "$(dirname "$0")/../.."
WHEELS=${WHEELS:-build/gpu}
OUT=${OUT:-/tmp/gpu_smoke_out}
HERE=examples/gpu_smoke
WORK=$(mktemp -d)
mkdir -p "$OUT"
# The machine sets PYTHONDONTWRITEBYTECODE=1: every process would compile this project's modules
# (installed below with --no-compile, or run from this tree) and any others without bytecode from
# source, ~0.1-0.4 s a process. An installed package has its bytecode (pip compiles at install),
# so it is written once, outside the installed trees, and read back as an installed package's is.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=$WORK/pycache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
install() { python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$WORK/tools" "$@" || exit 2; }
install "$WHEELS"/*.whl
export PYTHONPATH=$WORK/tools
python3 -c "import cryptography" 2>/dev/null || install "$WHEELS"/deps/{cryptography,cffi,pycparser}-*.whl
python3 -c "import packaging" 2>/dev/null || install "$WHEELS"/deps/packaging-*.whl
python3 -c "import cyclonedx" 2>/dev/null || install "$WHEELS"/deps/{cyclonedx_python_lib,license_expression,boolean_py,packageurl_python,py_serializable,defusedxml,sortedcontainers,typing_extensions}-*.whl
if ! python3 -c "import isal" 2>/dev/null && compgen -G "$WHEELS/deps/isal-*.whl" >/dev/null; then
    install "$WHEELS"/deps/isal-*.whl  # optional: adopt -o deflates with zlib without it
fi
run() { echo; echo "\$ $*"; "$@"; echo "(exit $?)"; }
flip() { python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^1]))" "$1"; }

SITE=$(python3 -c "import importlib.util, os; print(os.path.dirname(os.path.dirname(importlib.util.find_spec('triton').origin)))")
LIB=$SITE/triton/_C/libtriton.so
FLIPPED=0
cleanup() {
    [ "$FLIPPED" = 1 ] && flip "$LIB" && echo "libtriton.so restored"
    python3 -m triton_backend_runtime hook uninstall
}
trap cleanup EXIT

run python3 -c "import sys, importlib.metadata as md; print(sys.version.split()[0], 'torch', md.version('torch'), 'triton', md.version('triton'))"
run nvidia-smi -L
echo "site-packages: $SITE"
# Measured first, on a copy (the installed Triton is never changed by the benchmark).
run python3 bench/bench_adopt.py --installed "$SITE" | tee "$OUT/bench_adopt.txt"
run python3 -m backend_packager keygen -o "$WORK/keys/platform.pem" --comment "gpu platform team"
run python3 -m backend_packager adopt triton --site-packages "$SITE" --key "$WORK/keys/platform.pem" --jobs 8
run python3 -m triton_backend_runtime trust add "$WORK/keys/platform.pub"
run python3 -m triton_backend_runtime hook install
run env TRITON_BACKEND_POLICY=strict python3 -m triton_backend_runtime doctor | tee "$OUT/doctor_strict.txt"
run env TRITON_BACKEND_POLICY=strict python3 $HERE/smoke.py | tee "$OUT/smoke_strict.json"
# The installed, adopted Triton as it is (nothing downloaded or migrated): warm `import triton`
# under strict against the same import without the hook's .pth, then cold verification against
# a parallel sha256 of the same files.
run python3 bench/bench_runtime.py --site-packages "$SITE" -n 11 | tee "$OUT/bench_runtime.txt"
run python3 bench/bench_verify.py --site-packages "$SITE" -n 5 | tee "$OUT/bench_verify.txt"

echo; echo "flip one byte of the installed libtriton.so (same size):"
flip "$LIB" && FLIPPED=1
run env TRITON_BACKEND_POLICY=strict python3 -m triton_backend_runtime doctor | tee "$OUT/doctor_strict_tampered.txt"
echo; echo "\$ TRITON_BACKEND_POLICY=strict python3 -c 'import triton'"
TRITON_BACKEND_POLICY=strict python3 -c "import triton" 2>&1 | tail -1 || true  # refused, as it should be
