#!/usr/bin/env bash
# The GPU check (issue 11), as one prepared script in three steps. The GPU
# machine has no network and the lease is short, so everything is built here
# and only measuring happens there.
#
#   experiments/gpu.sh prepare   # here: build with --features cuda (fetching
#                                # CUDA 13 from pip when nvcc is missing), pack
#                                # .gpu/ (17 MB) to carry
#   experiments/gpu.sh device    # on the GPU machine, in the repo root, with
#                                # .gpu carried: tests with SMOOTHE_DEVICE=cuda,
#                                # SmoothE timings, train-cost on and off the GPU;
#                                # writes $OUT/gpu-device.csv, $OUT/gpu-tests.csv,
#                                # $OUT/gpu-train.csv, $OUT/gpu-logs.tgz
#   experiments/gpu.sh cpu       # here: the same SmoothE runs on this CPU
#   python3 experiments/gpu.py   # merges into experiments/gpu.csv and gpu.md
#
# Without nvcc on PATH, prepare fetches CUDA 13.0 (the GPU machine's
# version) from pip's wheels into target/cuda-toolchain; libcuda comes with
# the driver, not a wheel, so it links against a stub holding the driver
# API's names (the real one is found at run time). CUDA_COMPUTE_CAP=90
# builds for the H100/H200.
#
# The benchmark graphs are the five largest in ../shared/datasets (by nodes).
# Settings (environment): LIMIT (s, every run on this CPU, default 30),
# GPU_LIMIT (s, batch 1024 on the GPU, default 20: the lease is 15 minutes),
# SHORT (s, batches 32 and 256 on the GPU and 1024 on its host's CPU,
# default 8), STEPS (fixed-step runs compared across devices, default 20),
# TRAIN (1: also train-cost with the device on and off, about 3 minutes of
# the lease; 0 keeps the train-cost rows of the run before, default 1),
# TEST_LIMIT (s, each test binary, all at once; default 420: test-learn,
# the longest, ran past 290 s alone on 12 threads on 2026-12-04).
set -euo pipefail
cd "$(dirname "$0")/.."
GRAPHS=${GRAPHS:-"herbie/4225 herbie/3659 herbie/2953 herbie/1774 herbie/6712"}
LIMIT=${LIMIT:-30}
GPU_LIMIT=${GPU_LIMIT:-20}
SHORT=${SHORT:-8}
STEPS=${STEPS:-20}
TRAIN=${TRAIN:-1}
TEST_LIMIT=${TEST_LIMIT:-420}
B=.gpu

# One SmoothE run: device batch limit graph csv threads [steps]. Appends
# graph,device,batch_asked,batch,limit,steps_limit,ms_per_step,steps,dag_cost,valid,peak_mib,
# host_bytes_per_step
# (batch_asked 0: the default batch, from the graph size).
bench() {
  local dev=$1 batch=$2 limit=$3 g=$4 csv=$5 threads=$6 steps=${7:-0} bin=${SMOOTHE:-target/release/smoothe}
  local json=/tmp/gpu-run.json file
  file=$(graph_file "$g")
  local sampler="" base=0
  if [ "$dev" = cuda ]; then
    base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >/tmp/gpu-mem.log &
    sampler=$!
  fi
  local args=(extract --method smoothe --device "$dev" --batch "$batch" --time-limit "$limit" --threads "$threads" -q -o "$json")
  [ "$steps" != 0 ] && args+=(--steps "$steps")
  rm -f "$json"
  if ! timeout $((limit + 120)) "$bin" "${args[@]}" "$file" 2>>/tmp/gpu-errors.log; then
    echo "FAILED: $bin ${args[*]} $file" | tee -a /tmp/gpu-errors.log >&2
  fi
  local peak=""
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    peak=$(sort -n /tmp/gpu-mem.log | tail -1)
    peak=$((${peak:-$base} - base))
  fi
  local valid=false
  [ -s "$json" ] && "$bin" check "$file" "$json" >/dev/null 2>&1 && valid=true
  python3 - "$json" "$g" "$dev" "$batch" "$limit" "$steps" "$valid" "$peak" >>"$csv" <<'EOF'
import json, sys
path, g, dev, batch, limit, steps, valid, peak = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception:
    r = {}
print(",".join(str(x) for x in [g, dev, batch, r.get("batch", ""), limit, steps, r.get("ms_per_step", ""),
                               r.get("steps", ""), r.get("dag_cost", ""), valid, peak, r.get("host_bytes_per_step", "")]))
EOF
  tail -1 "$csv"
}

graph_file() {
  if [ -d "$B/x/data" ]; then echo "$B/x/data/$(echo "$1" | tr / _).json"; else echo "../shared/datasets/$1.json"; fi
}

TESTS_HEADER=binary,call,exit_code,passed,failed,ignored,seconds,failed_tests,unfinished
HEADER=graph,device,batch_asked,batch,limit_s,steps_limit,ms_per_step,steps,dag_cost,valid,peak_mib,host_bytes_per_step

# CUDA 13.0 for building, from pip's wheels, into target/cuda-toolchain
# (about 700 MB): nvcc and its parts, the runtime and the libraries candle
# links, plus a stub libcuda with the names cudarc's driver bindings use.
toolchain() {
  local dir=$PWD/target/cuda-toolchain
  if [ ! -x "$dir/nvidia/cu13/bin/nvcc" ]; then
    mkdir -p "$dir/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$dir/wheels" \
      --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
      "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-runtime==13.0.*" \
      "nvidia-cuda-cccl==13.0.*" "nvidia-cublas==13.0.*" "nvidia-curand==10.4.0.*" "nvidia-cuda-nvrtc==13.0.*"
    for w in "$dir"/wheels/*.whl; do unzip -qo "$w" -d "$dir"; done
    chmod +x "$dir"/nvidia/cu13/bin/* "$dir"/nvidia/cu13/nvvm/bin/*
    local lib
    for lib in cudart cublas cublasLt curand nvrtc; do
      ln -sf "$(basename "$(ls "$dir"/nvidia/cu13/lib/lib$lib.so.* | head -1)")" "$dir/nvidia/cu13/lib/lib$lib.so"
    done
    local bindings
    bindings=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | tail -1)
    mkdir -p "$dir/stub"
    grep -oE "^\s+fn cu[A-Za-z0-9_]+\(" "$bindings" | sed -E 's/^\s+fn //; s/\(//' | sort -u |
      awk '{print "void "$1"(void){}"}' >"$dir/stub/cuda.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$dir/stub/libcuda.so" "$dir/stub/cuda.c"
  fi
  export PATH="$dir/nvidia/cu13/bin:$PATH"
  export LIBRARY_PATH="$dir/nvidia/cu13/lib:$dir/stub${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

prepare() {
  # cudarc's sources (for the stub's names) come with the first fetch.
  cargo fetch --quiet
  command -v nvcc >/dev/null || toolchain
  export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
  local target=target/cuda
  CARGO_TARGET_DIR=$target cargo test --release --features cuda --no-run --message-format=json >/tmp/gpu-build.json
  rm -rf $B && mkdir -p $B/x/bin $B/x/tests $B/x/lib $B/x/data
  python3 - >/tmp/gpu-tests.txt <<'EOF'
import json
for line in open("/tmp/gpu-build.json"):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["kind"][0] + "-" + m["target"]["name"], m["executable"])
EOF
  while read -r name exe; do objcopy --strip-debug "$exe" "$B/x/tests/$name"; done </tmp/gpu-tests.txt
  objcopy --strip-debug $target/release/smoothe $B/x/bin/smoothe
  cp -L "$(dirname "$(command -v nvcc)")/../lib/libcudart.so.13" $B/x/lib/
  for g in $GRAPHS; do cp "../shared/datasets/$g.json" "$B/x/data/$(echo "$g" | tr / _).json"; done
  echo "$PWD" >$B/x/build_root
  tar -C $B/x -cf - . | xz -T0 -6 >$B/bundle.tar.xz
  rm -rf $B/x
  ls -la $B
}

device() {
  : "${OUT:?device runs on the GPU machine, which sets OUT}"
  local logs=/tmp/gpu-logs
  mkdir -p $logs $B/x && tar -C $B/x -xJf $B/bundle.tar.xz
  # The test binaries hold their build paths (CARGO_MANIFEST_DIR and the
  # smoothe binary's path): make those paths lead here.
  local root
  root=$(cat $B/x/build_root)
  if [ "$(cd "$PWD" && pwd -P)" != "$root" ] && [ ! -e "$root" ]; then
    mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
  fi
  mkdir -p "$root/target/cuda/release" && cp $B/x/bin/smoothe "$root/target/cuda/release/smoothe"
  export SMOOTHE=$PWD/$B/x/bin/smoothe
  local libs=$PWD/$B/x/lib d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 \
    /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && libs="$libs:$d"
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee $logs/nvidia-smi.txt
  nproc
  if ldd "$SMOOTHE" | grep "not found"; then echo "libraries missing" >&2; exit 1; fi
  # Smoke test: one short run on the device, or stop here with the error.
  "$SMOOTHE" extract --method smoothe --device cuda --steps 3 -q datasets/esyn/mul3.json >/dev/null

  # The whole test suite with the device on, first (a wrong kernel should
  # stop the timings from counting): every binary at once, then parsed.
  # --nocapture: a failure's message reaches the log when it happens, not
  # in libtest's closing summary, which a binary cut off at TEST_LIMIT never
  # prints; gpu.py --test-row counts each test's own line instead, and names
  # the listed tests that never finished.
  local scsv=$OUT/gpu-tests.csv t
  echo "$TESTS_HEADER" >"$scsv"
  for t in $B/x/tests/*; do
    (
      name=$(basename "$t")
      "$t" --list >"$logs/test-$name.list" 2>/dev/null || true
      s0=$(date +%s)
      rc=0
      SMOOTHE_DEVICE=cuda timeout "$TEST_LIMIT" "$t" --test-threads 4 --nocapture >"$logs/test-$name.log" 2>&1 || rc=$?
      echo "$rc $(($(date +%s) - s0))" >"$logs/test-$name.rc"
    ) &
  done
  wait
  for t in $B/x/tests/*; do
    local name
    name=$(basename "$t")
    # shellcheck disable=SC2046
    python3 experiments/gpu.py --test-row "$name" $(cat "$logs/test-$name.rc") "$logs/test-$name.log" \
      "$logs/test-$name.list" >>"$scsv"
    tail -1 "$scsv"
  done
  tar -C /tmp -czf "$OUT/gpu-logs.tgz" gpu-logs

  local csv=$OUT/gpu-device.csv
  echo $HEADER >"$csv"
  # Fixed steps and seed, 2 threads, batch 32: compared with the CPU here.
  for g in $GRAPHS; do bench cuda 32 0 "$g" "$csv" 2 "$STEPS"; done
  for g in $GRAPHS; do
    for b in 32 256; do bench cuda $b "$SHORT" "$g" "$csv" 16; done
    bench cuda 1024 "$GPU_LIMIT" "$g" "$csv" 16
    # The same batch with the device off, on this machine's 16 cores: how
    # much of the speed is the GPU and how much the host.
    bench cpu 1024 "$SHORT" "$g" "$csv" 16
  done

  # train-cost with the device on and off (toy oracle: no synthesis tools).
  [ "$TRAIN" = 1 ] && train_on_and_off "$logs"
  cp /tmp/gpu-errors.log $logs/ 2>/dev/null || true
  tar -C /tmp -czf "$OUT/gpu-logs.tgz" gpu-logs
}

# train-cost on mul3 with the device on and off: OUT/gpu-train.csv.
train_on_and_off() {
  local logs=$1 tcsv=$OUT/gpu-train.csv
  local settings="--initial 40 --rounds 2 --per-round 20"
  echo device,settings,seconds,fit_seconds,labels,best_real >"$tcsv"
  for dev in cuda cpu; do
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 300 "$SMOOTHE" train-cost --oracle examples/oracles/toy.py $settings --device $dev --threads 16 \
      --out /tmp/gpu-tc-$dev -q datasets/esyn/mul3.json >$logs/train-$dev.log 2>&1 || echo "train-cost $dev failed" >&2
    t1=$(date +%s.%N)
    python3 - "$dev" "$t0" "$t1" "$settings" >>"$tcsv" <<'EOF'
import json, sys
dev, t0, t1, settings = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    rounds = json.load(open(f"/tmp/gpu-tc-{dev}.rounds.json"))
except Exception:
    rounds = [{}]
fit = sum(r.get("fit_seconds", 0.0) for r in rounds)
print(f"{dev},{settings},{t1 - t0:.2f},{fit:.3f},{rounds[-1].get('labels', '')},{rounds[-1].get('best_real_cost', '')}")
EOF
    tail -1 "$tcsv"
  done
}

cpu() {
  cargo build --release --quiet
  export SMOOTHE=${SMOOTHE:-target/release/smoothe}
  mkdir -p experiments/out/gpu
  local csv=experiments/out/gpu/cpu.csv
  echo $HEADER >"$csv"
  for g in $GRAPHS; do bench cpu 32 0 "$g" "$csv" 2 "$STEPS"; done
  for g in $GRAPHS; do
    for b in 0 32 256 1024; do bench cpu $b "$LIMIT" "$g" "$csv" 2; done
  done
}

case "${1:-}" in
  prepare) prepare ;;
  device) device ;;
  cpu) cpu ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
