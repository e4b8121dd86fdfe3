# Sourced by the scripts that measure on the GPU machine in one call (bench/gpu_measurements.sh,
# bench/gpu_sampler_ab.sh), after they set `out` (a folder), `tarname` and `smoke` (non-empty:
# any machine, tiny): runs from the checkout's root, installs the carried wheels (the prebuilt
# kernels, ../shared/gpu/README.md) unless smoke, and defines `part`.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [[ -z $smoke && -d .gpu_carry/wheels ]]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu_carry/wheels/*.whl
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

# NAME SECONDS PYTHON-ARGS...: one part under its own time limit, its output in $work/NAME.log,
# its exit status printed; then everything so far packed into $out/$tarname (the device tool
# brings back 8 files at most, and a call stopped at its limit still returns the parts done)
part() {
    local name=$1 seconds=$2
    shift 2
    timeout "$seconds" python3 "$@" >"$work/$name.log" 2>&1
    echo "$name: exit $? ($(tail -n 1 "$work/$name.log"))"
    tar -cf "$out/$tarname" -C "$work" .
}
