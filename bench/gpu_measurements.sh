#!/usr/bin/env bash
# The GPU measurements issue 35 still needs, in one call on a fresh GPU machine, in the order of
# what they tell (BENCHMARKS.md, "GPU sampler"): a per-kernel profile of 64-row steps, the
# sampler at 256 rows in float32, in bfloat16 at 64 rows, the training step at 128 and 512
# windows, and 1,024 rows at T = 64. Each part runs under its own time limit, so one that
# overruns costs only itself, and writes NAME.log (its output) and, for the sampler, NAME/ (the
# bench's files). After each part everything so far is packed into OUT/measurements.tar: the
# device tool brings back at most 8 files, and a call stopped at its limit still returns the
# parts done.
#
#   bench/gpu_measurements.sh OUT            # on the GPU machine: installs .gpu_carry/wheels
#   bench/gpu_measurements.sh OUT --smoke    # any machine: the sampler parts, tiny (tests)
#
# From the session: run(command="bash bench/gpu_measurements.sh $OUT", carry=[".gpu_carry"],
# timeout_s=450, kind="nvidia-h200"): the parts' limits add up to 400 s.
set -uo pipefail
out=${1:?usage: bench/gpu_measurements.sh OUT [--smoke]}
smoke=${2:-}
tarname=measurements.tar
source "$(dirname "$0")/gpu_parts.sh"

sampler=(bench/bench_gpu_sampler.py --samplers ancestral)
if [[ -n $smoke ]]; then
    part profile 120 "${sampler[@]}" --smoke --profile 2 --out "$work/profile"
    part bf16 120 "${sampler[@]}" --smoke --dtype bfloat16 --out "$work/bf16"
    exit 0
fi
part profile 40 "${sampler[@]}" --rows 16 --steps 2 --profile 64 --out "$work/profile"
part f32_256 150 "${sampler[@]}" --rows 256 --out "$work/f32_256"  # ~50 s a draw, 2 draws
part bf16 60 "${sampler[@]}" --rows 64 --dtype bfloat16 --profile 64 --out "$work/bf16"
part train_128 40 bench/bench_gpu.py --skip-sampling --batch 128
part train_512 50 bench/bench_gpu.py --skip-sampling --batch 512
part f32_1024 60 "${sampler[@]}" --rows 1024 --steps 64 --out "$work/f32_1024"
