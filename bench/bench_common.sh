# Shared by the benchmark scripts (sourced, not run): machine facts, waiting for a quiet machine,
# the measuring wrapper, dropping the page cache. The caller defines log() and sets $repo,
# $cache_root and $wait_idle (seconds; 0: do not wait).

# The facts that make a measurement meaningful, as key=value lines; callers add their own.
machine_facts() {
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu_model=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
    echo "cpus=$(nproc)"
    echo "mem_total_kib=$(awk '/^MemTotal/ {print $2}' /proc/meminfo)"
    echo "kernel=$(uname -r)"
    echo "loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
}

# Waits up to $wait_idle seconds for 15 s of quiet (at most one runnable task besides the caller
# in 3 samples 5 s apart). On a 2-core machine any other busy process slows a thread pool far
# more than what is being measured; the load average is no guide, as the previous run raises it.
wait_for_idle() {
    local waited=0 quiet=0 runnable
    while (( waited < wait_idle )); do
        read -r _ _ _ runnable _ < /proc/loadavg
        if (( ${runnable%/*} <= 2 )); then
            quiet=$((quiet + 1))
            (( quiet >= 3 )) && return 0
        else
            quiet=0
        fi
        sleep 5
        waited=$((waited + 5))
    done
    (( wait_idle == 0 )) || log "machine not idle after ${wait_idle}s (load $(cut -d' ' -f1-4 /proc/loadavg)); running anyway"
}

# The disk under FILE, for benchmarks that read it: size, file system, device, its scheduler and
# whether it is rotational, as key=value lines like machine_facts.
disk_facts() {
    local file=$1 source dev
    source=$(df --output=source "$file" | tail -n1)
    dev=$(basename "$(readlink -f "$source")")
    [[ -e /sys/class/block/$dev/partition ]] && dev=$(basename "$(readlink -f "/sys/class/block/$dev/..")")
    echo "file=$file"
    echo "file_bytes=$(stat -c %s "$file")"
    echo "file_system=$(stat -f -c %T "$file")"
    echo "device=$source"
    echo "device_scheduler=$(cat "/sys/block/$dev/queue/scheduler" 2>/dev/null || echo unknown)"
    echo "device_rotational=$(cat "/sys/block/$dev/queue/rotational" 2>/dev/null || echo unknown)"
}

# Median of the numbers on stdin, one per line; "-" when there are none. Printed in plain decimals
# (awk's default %.6g would turn byte counts into 4.16374e+09, which bc cannot read).
median() {
    sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        if (m == int(m)) printf "%.0f\n", m; else printf "%.6f\n", m }'
}

# The synthetic drelu model the sparse benchmarks share, in $models_dir (the caller sets it and
# $ember): NAME.gguf with predictors of rank RANK and type PTYPE and ffn_down_t; NAME.profile, the
# activation profile (`ember profile` on text the model generated); NAME.pack.gguf, its pack.
# drelu_paths PRESET QUANT RANK PTYPE sets drelu_model, drelu_profile, drelu_pack, drelu_text.
drelu_paths() {
    local name="$1-drelu-$2-r$3-p$4"
    drelu_model="$models_dir/$name.gguf"
    drelu_profile="$models_dir/$name.profile"
    drelu_pack="$models_dir/$name.pack.gguf"
    drelu_text="$models_dir/$name-generated.txt"
}

# ensure_drelu_model PRESET QUANT RANK PTYPE: sets the paths and writes the model if it is missing
# (~2 min and 5.2 GB for mistral-7b). Written under a temporary name first so that an interrupted
# run does not leave a truncated file that later runs would take for the model.
ensure_drelu_model() {
    drelu_paths "$@"
    [[ -f "$drelu_model" ]] && return 0
    mkdir -p "$models_dir"
    log "writing $drelu_model"
    "$ember" synth --preset "$1" --type "$2" --activation drelu --predictor --predictor-rank "$3" \
        --predictor-type "$4" --down-transposed -q -o "$drelu_model.partial" >&2
    mv "$drelu_model.partial" "$drelu_model"
}

# ensure_drelu_pack PRESET QUANT RANK PTYPE: sets the paths and makes the pack if it is missing
# (and the model first if that is missing too; ~1 min more for mistral-7b).
ensure_drelu_pack() {
    drelu_paths "$@"
    [[ -f "$drelu_pack" ]] && return 0
    ensure_drelu_model "$@"
    log "profiling on text the model generates, then packing"
    "$ember" run -m "$drelu_model" -p "Once upon a time" -n 512 --temp 0.8 -s 1 > "$drelu_text" 2>/dev/null
    "$ember" profile -m "$drelu_model" -f "$drelu_text" -o "$drelu_profile" >&2
    "$ember" pack -m "$drelu_model" --profile "$drelu_profile" -o "$drelu_pack" >&2  # pack writes atomically
}

# The measuring wrapper (bench/tools/run_measured.c) in $cache_root/bin, compiled when missing or
# older than its source; sets $measure to its path. For the scripts that run engines in cgroups.
ensure_run_measured() {
    measure="$cache_root/bin/run_measured"
    if [[ ! -x "$measure" || "$repo/bench/tools/run_measured.c" -nt "$measure" ]]; then
        log "compiling $measure"
        mkdir -p "$cache_root/bin"
        gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$measure.tmp" "$repo/bench/tools/run_measured.c"
        mv "$measure.tmp" "$measure"
    fi
}

# Every process of a cache-sensitive run starts cold: the dirty pages written, the cache dropped.
drop_page_cache() { sync; echo 3 > /proc/sys/vm/drop_caches; }
