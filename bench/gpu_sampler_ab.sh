#!/usr/bin/env bash
# The GPU sampler of two revisions in one call on one GPU, so that their ratio is measured on one
# machine (BENCHMARKS.md, "GPU sampler"): BASE, a folder holding another revision's genodiff/,
# bench/ and configs/, and this checkout run bench/bench_gpu_sampler.py alternately with the same
# settings (64 rows x 1,024 bp, ancestral, T = 256: the step costs the same as at T = 1,024, so
# bp/s at T = 1,024 is 257/1,025 of it), in float32 and bfloat16, this checkout with a per-kernel
# profile of 64-row steps; then this checkout's GPU tests (tests/gpu: the kernels against the
# exact CPU path, graphed draws against eager ones; and the text plugin's CUDA test), and last
# this checkout's first-hitting sampler at 256 rows x 1,024 bp (a call per position, ~45 s a draw)
# and at 1,024 rows drawing the last 64 positions (--masked 64: the same calls, 64 of them).
# Everything lands in OUT/ab.tar, packed after each part.
#
#   git archive REV genodiff bench configs | tar -x -C .gpu_carry/base   # here, before the session
#   bench/gpu_sampler_ab.sh OUT .gpu_carry/base           # on the GPU machine
#   bench/gpu_sampler_ab.sh OUT BASE --smoke              # any machine, tiny, float32 (tests)
#
# From the session: run(command="bash bench/gpu_sampler_ab.sh $OUT .gpu_carry/base",
# carry=[".gpu_carry"], timeout_s=600, kind="nvidia-h200"): the parts' limits add up to 600 s.
set -uo pipefail
out=${1:?usage: bench/gpu_sampler_ab.sh OUT BASE [--smoke]}
base=$(cd "${2:?usage: bench/gpu_sampler_ab.sh OUT BASE [--smoke]}" && pwd)
smoke=${3:-}
tarname=ab.tar
source "$(dirname "$0")/gpu_parts.sh"

if [[ -n $smoke ]]; then  # one dtype: bench/gpu_measurements.sh --smoke runs bfloat16
    settings=(--samplers ancestral --smoke)
    profile=(--profile 2)
    dtypes=(float32)
else
    settings=(--samplers ancestral --rows 64 --steps 256)
    profile=(--profile 64)
    dtypes=(float32 bfloat16)
fi
for dtype in "${dtypes[@]}"; do
    part "base_$dtype" 60 "$base/bench/bench_gpu_sampler.py" "${settings[@]}" \
        --dtype "$dtype" --out "$work/base_$dtype"
    part "head_$dtype" 60 bench/bench_gpu_sampler.py "${settings[@]}" "${profile[@]}" \
        --dtype "$dtype" --out "$work/head_$dtype"
done
# and the text plugin's one CUDA test (the DiT's bf16 autocast; it needs torch and genodiff only)
dit_cuda=plugins/genodiff-text/tests/test_text_dit.py::test_cuda_runs_in_bf16_autocast_and_returns_float32
[[ -n $smoke ]] || PYTHONPATH="$PWD/plugins/genodiff-text/src:$PYTHONPATH" part gpu_tests 150 \
    -m pytest -q -x -p no:cacheprovider tests/gpu "$dit_cuda"
[[ -n $smoke ]] || part first_hitting_256 130 bench/bench_gpu_sampler.py --samplers first-hitting \
    --rows 256 --out "$work/first_hitting_256"
[[ -n $smoke ]] || part first_hitting_1024 80 bench/bench_gpu_sampler.py --samplers first-hitting \
    --rows 1024 --masked 64 --out "$work/first_hitting_1024"
