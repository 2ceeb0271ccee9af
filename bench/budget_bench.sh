#!/usr/bin/env bash
# Decode speed of Ember's sparse (predictor) path on a pack under a memory budget: the
# neuron cache's hit rate, bytes read per token, peak RSS against budget + KV cache + a stated
# fixed overhead, io_uring against the pread pool, and the read throughput achieved against fio
# random reads of the same block size and queue depth on the same file. A benchmark, not a test:
# it prints Markdown tables and writes raw JSON under bench/results/budget-<UTC date>/.
#
# usage: bench/budget_bench.sh [--preset mistral-7b] [--type Q4_0] [--rank 256] [--predictor-type Q4_0]
#                              [--model PACK] [--budgets "100% 50% 25%"] [--backends "uring pread"]
#                              [--no-ram] [--runs 3] [--threads 2] [--prompt-tokens 16] [--gen-tokens 32]
#                              [--ember-args "ARGS"] [--overhead-mib 64] [--fio-runtime 5] [--no-fio]
#                              [--ember PATH] [--out DIR] [--wait-idle SECONDS] [--report DIR]
# --model PACK uses that pack instead of the preset's; --no-ram skips the all-in-RAM reference;
# --report DIR prints the tables of an earlier run's DIR again without running anything.
#
# Each configuration (every budget x backend, plus the pack all in RAM without --memory-budget)
# runs R times as a fresh process, configurations alternating, each after dropping the page cache
# (needs root; skipped with a warning otherwise). Each process is
#   ember bench -m PACK -t T --sparse predictor [--memory-budget B --io-backend BACKEND]
#               --prompt-tokens P --gen-tokens N --runs 1 --json --stats-json FILE
# under /usr/bin/time -v (its maximum RSS cross-checks the engine's peak_rss_bytes): one untimed
# warm-up, one timed run. Right after each budget run that read from the pack, fio runs for
# --fio-runtime seconds at that run's read size, alignment and queue depth: this VM's disk speed
# drifts ~3x over minutes, so "% of fio" compares each run with the disk as it was at the time.
# Each run also records the CPU steal time of the machine while it ran (/proc/stat).
# The pack (~4.2 GB for mistral-7b) is made as bench/sparse_bench.sh makes it, on first use, in
# EMBER_MODELS_DIR (default ~/.cache/ember/models).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly models_dir="${EMBER_MODELS_DIR:-${EMBER_CACHE:-$HOME/.cache/ember}/models}"
preset=mistral-7b
quant=Q4_0
rank=256
predictor_type=Q4_0
pack=""
budgets="100% 50% 25%"
backends="uring pread"
with_ram=true
runs=3
threads=2
prompt_tokens=16
gen_tokens=32
ember_args=""
overhead_mib=""
fio_runtime=5
with_fio=true
ember="$repo/build/ember"
out_dir=""
wait_idle=0
report_only=false
readonly ram_label="all-in-RAM"
# Queue depths of io/io_backend.h's defaults, used for fio when a run does not report its own.
readonly default_qd_uring=32 default_qd_pread=16
# What a process holds besides the budget, the KV cache and the scratch buffers: code, libraries,
# thread stacks, the tokenizer, allocator slack. Stated, not measured: the RSS column checks it.
# Measured on the 1b check pack: peak RSS - budget - KV - scratch = ~18 MiB.
readonly default_overhead_mib=64

usage() { sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "budget_bench.sh: error: $*" >&2; exit 1; }
log() { echo "budget_bench.sh: $*" >&2; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --preset) preset="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --rank) rank="$2"; shift 2 ;;
        --predictor-type) predictor_type="$2"; shift 2 ;;
        --model) pack="$2"; shift 2 ;;
        --budgets) budgets="$2"; shift 2 ;;
        --backends) backends="$2"; shift 2 ;;
        --no-ram) with_ram=false; shift ;;
        --runs) runs="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompt-tokens) prompt_tokens="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --ember-args) ember_args="$2"; shift 2 ;;
        --overhead-mib) overhead_mib="$2"; shift 2 ;;
        --fio-runtime) fio_runtime="$2"; shift 2 ;;
        --no-fio) with_fio=false; shift ;;
        --ember) ember="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        --report) out_dir="$2"; report_only=true; shift 2 ;;
        -h|--help) usage ;;
        *) echo "budget_bench.sh: unknown option '$1'" >&2; usage ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || fail "--runs must be a positive integer, got '$runs'"
[[ "$fio_runtime" =~ ^[1-9][0-9]*$ ]] || fail "--fio-runtime must be a positive number of seconds, got '$fio_runtime'"
[[ -z "$overhead_mib" || "$overhead_mib" =~ ^[0-9]+$ ]] || fail "--overhead-mib must be a whole number, got '$overhead_mib'"
for b in $backends; do [[ "$b" == uring || "$b" == pread ]] || fail "--backends takes uring and/or pread, got '$b'"; done
command -v jq >/dev/null || fail "jq is needed (apt-get install jq)"
command -v bc >/dev/null || fail "bc is needed (apt-get install bc)"

# ---------------------------------------------------------------------------------------------
# Running

# Empties the page cache so that every process starts cold, as after a reboot: the all-in-RAM run
# then pays for its load and the budget runs cannot profit from pages an earlier run left behind
# (O_DIRECT reads bypass the cache, but the resident tensors are read through it).
page_cache_dropped=false
drop_page_cache() {
    page_cache_dropped=false
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        sync
        echo 3 > /proc/sys/vm/drop_caches && page_cache_dropped=true
    elif [[ -z "${drop_warned:-}" ]]; then
        drop_warned=1
        log "warning: /proc/sys/vm/drop_caches is not writable (not root?): the page cache is not dropped between runs"
    fi
}

# File-name form of a configuration label ("50% uring" -> "50pct-uring").
slug() { echo "$1" | sed 's/%/pct/g; s/[^A-Za-z0-9._-]\{1,\}/-/g'; }

# The file's (first) JSON value, compact, or null when it is missing or not JSON.
json_or_null() { { [[ -s "$1" ]] && jq -cs '.[0]' "$1" 2>/dev/null; } || echo null; }

# "TOTAL STEAL": the machine's CPU ticks so far, all of them and those stolen by the hypervisor.
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; ++i) t += $i; print t, $9; exit }' /proc/stat; }

# run_one ROUND LABEL BUDGET BACKEND: one fresh process, one line in runs.jsonl.
run_one() {
    local round=$1 label=$2 budget=$3 backend=$4
    local base; base="$out_dir/raw/r$round-$(slug "$label")"
    local args=(bench -m "$pack" -t "$threads" --sparse predictor)
    [[ "$budget" != - ]] && args+=(--memory-budget "$budget" --io-backend "$backend")
    # shellcheck disable=SC2206  # --ember-args is split into words on purpose
    args+=(--prompt-tokens "$prompt_tokens" --gen-tokens "$gen_tokens" --runs 1 --json --stats-json "$base.stats.json" $ember_args)
    rm -f "$base.stats.json"
    wait_for_idle
    drop_page_cache
    local load_before rc=0 ticks_before ticks_after
    load_before="$(cut -d' ' -f1-4 /proc/loadavg)"
    ticks_before=$(cpu_ticks)
    /usr/bin/time -v -o "$base.time.txt" "$ember" "${args[@]}" > "$base.stdout" 2> "$base.stderr" || rc=$?
    ticks_after=$(cpu_ticks)
    local steal_pct
    steal_pct=$(awk -v a="$ticks_before" -v b="$ticks_after" 'BEGIN { split(a, x, " "); split(b, y, " ");
        d = y[1] - x[1]; if (d > 0) printf "%.1f", 100 * (y[2] - x[2]) / d; else print "null" }')
    local maxrss_kib wall
    maxrss_kib=$(sed -n 's/^\s*Maximum resident set size (kbytes): *//p' "$base.time.txt" 2>/dev/null || true)
    wall=$(sed -n 's/^\s*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$base.time.txt" 2>/dev/null || true)
    grep '^{' "$base.stdout" | tail -n1 > "$base.bench.json" || true
    local error=""
    (( rc != 0 )) && error=$(grep -i 'error' "$base.stderr" | tail -n1 | cut -c1-400 || true)
    jq -cn --arg lbl "$label" --arg budget "$budget" --arg backend "$backend" --argjson round "$round" \
        --argjson rc "$rc" --argjson bench "$(json_or_null "$base.bench.json")" \
        --argjson stats "$(json_or_null "$base.stats.json")" --arg maxrss_kib "$maxrss_kib" --arg wall "$wall" \
        --argjson file_bytes "$(stat -c %s "$pack")" --argjson dropped "$page_cache_dropped" \
        --arg load_before "$load_before" --arg load_after "$(cut -d' ' -f1-4 /proc/loadavg)" --argjson steal "$steal_pct" \
        --arg command "$ember ${args[*]}" --arg error "$error" \
        '{"label": $lbl, budget: $budget, backend: $backend, round: $round, rc: $rc, bench: $bench,
          stats: $stats, time_maxrss_bytes: (($maxrss_kib | tonumber? // null) | if . then . * 1024 else null end),
          wall: $wall, file_bytes: $file_bytes, page_cache_dropped: $dropped,
          loadavg_before: $load_before, loadavg_after: $load_after, steal_pct: $steal, command: $command,
          error: (if $error == "" then null else $error end)}' >> "$out_dir/runs.jsonl"
    if (( rc != 0 )); then
        log "run $round/$runs: $label FAILED (exit $rc); last lines of $base.stderr:"
        tail -n 5 "$base.stderr" | sed 's/^/    /' >&2
        failed_runs=$((failed_runs + 1))
    else
        log "run $round/$runs: $label: $(tail -n1 "$out_dir/runs.jsonl" | jq -r \
            'def r2: if type == "number" then . * 100 | round / 100 else . end;
             "decode \(.bench.decode_tokens_per_s // .stats.decode_tokens_per_s // "?" | r2) tok/s, hit rate \(.stats.cache_hit_rate // "-" | r2), peak RSS \((.stats.peak_rss_bytes // .time_maxrss_bytes // 0) / 1048576 | round) MiB, CPU steal \(.steal_pct // "?") %"')"
        if $with_fio && [[ "$budget" != - ]]; then
            local key; key=$(fio_key_of_run "$round" "$label")
            # shellcheck disable=SC2086  # the key is "BACKEND BS QD ALIGN"
            [[ -n "$key" ]] && run_fio $key "$round" "$label"
        fi
    fi
}

# run_fio BACKEND BS QD ALIGN ROUND LABEL: random O_DIRECT reads of the pack like the backend's,
# BS bytes at offsets that are multiples of ALIGN: io_uring at queue depth QD, or QD threads of
# pread (psync), which is what the pread pool does. One line in fio.jsonl, tied to the run.
run_fio() {
    local backend=$1 bs=$2 qd=$3 align=$4 round=$5 label=$6
    local name; name="fio-r$round-$(slug "$label")-bs$bs-qd$qd-a$align"
    local args=(--name="$name" --filename="$pack" --rw=randread --bs="$bs" --blockalign="$align" --direct=1 --readonly
                --runtime="$fio_runtime" --time_based --output-format=json)
    if [[ "$backend" == uring ]]; then
        args+=(--ioengine=io_uring --iodepth="$qd" --fixedbufs=1 --registerfiles=1)  # as io/uring_reader does
    else
        args+=(--ioengine=psync --iodepth=1 --numjobs="$qd" --group_reporting)
    fi
    log "fio: $backend, $bs-byte random reads at $align-byte offsets, queue depth $qd"
    if ! fio "${args[@]}" > "$out_dir/$name.json" 2> "$out_dir/$name.stderr"; then
        log "fio failed for $backend bs $bs qd $qd: $(tail -n 3 "$out_dir/$name.stderr" | tr '\n' ' ')"
        return 0
    fi
    jq -c --arg backend "$backend" --argjson bs "$bs" --argjson qd "$qd" --argjson align "$align" --argjson round "$round" \
        --arg lbl "$label" --arg file "$name.json" --arg cmd "fio ${args[*]}" \
        '.jobs[0].read as $r | {backend: $backend, bs: $bs, qd: $qd, align: $align, round: $round, "label": $lbl,
          mib_per_s: ($r.bw_bytes / 1048576),
          iops: $r.iops, p50_us: ($r.clat_ns.percentile["50.000000"] / 1000),
          p99_us: ($r.clat_ns.percentile["99.000000"] / 1000), file: $file, command: $cmd}' \
        "$out_dir/$name.json" >> "$out_dir/fio.jsonl"
}

# ---------------------------------------------------------------------------------------------
# Reading runs.jsonl (shared by the run and --report)

# stat_of KEY: a jq expression for KEY of a run's stats object, looked up at the top level first,
# then in nested objects, so a regrouping of the stats file does not blank the table.
stat_of() { echo "(.stats // {} | first(.. | objects | select(has(\"$1\")) | .\"$1\") // null)"; }

# vals LABEL JQ_EXPR: the expression's numeric values, one per successful run of LABEL.
vals() { jq -r --arg l "$1" "select(.label == \$l and .rc == 0) | $2 | numbers" "$out_dir/runs.jsonl"; }
stat_vals() { vals "$1" "$(stat_of "$2")"; }
# The run's typical read size: the median coalesced read if the build reports it, else the mean.
read_block_vals() { vals "$1" "($(stat_of read_block_bytes_median) // $(stat_of read_block_bytes_mean))"; }
decode_vals() { vals "$1" "(.bench.decode_tokens_per_s // $(stat_of decode_tokens_per_s))"; }
max_of() { sort -g | tail -n1 | grep . || echo -; }

fmt() { [[ "$1" == - ]] && echo - || printf "%.${2}f" "$1"; }
fmt_bytes() {
    [[ "$1" == - ]] && { echo -; return; }
    awk -v b="$1" 'BEGIN {
        if (b >= 1073741824) printf "%.2f GiB", b / 1073741824
        else if (b >= 1048576) printf "%.1f MiB", b / 1048576
        else if (b >= 1024) printf "%.1f KiB", b / 1024
        else printf "%d B", b }'
}
# A hit rate may come as a fraction or as a percentage.
fmt_rate() { [[ "$1" == - ]] && echo - || awk -v r="$1" 'BEGIN { printf "%.1f %%", (r <= 1 ? r * 100 : r) }'; }
ratio() { [[ "$1" == - || "$2" == - || $(echo "$2 == 0" | bc) == 1 ]] && echo - || echo "$1 / $2" | bc -l; }

# fio_key_of_run ROUND LABEL: "BACKEND BS QD ALIGN" for fio after that run: its typical read size
# (median coalesced read, else the mean) rounded up to its read alignment (O_DIRECT: 512 or 4096),
# its queue depth and alignment; nothing when the run read nothing.
fio_key_of_run() {
    jq -r --arg l "$2" --argjson r "$1" --argjson qu "$default_qd_uring" --argjson qp "$default_qd_pread" '
        select(.label == $l and .round == $r and .rc == 0) | . as $run
        | (.stats // {}) as $s
        | ($s.read_block_bytes_median // $s.read_block_bytes_mean // 0) as $bs
        | ($s.read_alignment // 4096 | if . < 512 then 4096 else . end) as $a
        | select($bs > 0 and ($run.backend == "uring" or $run.backend == "pread"))
        | "\($run.backend) \((($bs + $a - 1) / $a | floor) * $a | floor) \($s.queue_depth // (if $run.backend == "uring" then $qu else $qp end)) \($a)"
    ' "$out_dir/runs.jsonl" | tail -n1
}

# Per successful run of LABEL with a fio run after it: "FIO_MIB PCT" (the run's read MiB/s over
# fio's).
fio_pairs() {
    [[ -s "$out_dir/fio.jsonl" ]] || return 0
    jq -rn --arg l "$1" '[inputs] as $all
        | ($all | map(select(has("mib_per_s") and .label == $l))) as $fio
        | ($all | map(select(has("rc") and .label == $l and .rc == 0)))[] as $run
        | ($fio | map(select(.round == $run.round)) | last) as $f
        | select($f != null and ($run.stats.io_read_mib_per_s // null) != null and $f.mib_per_s > 0)
        | "\($f.mib_per_s) \($run.stats.io_read_mib_per_s / $f.mib_per_s) \($f.bs) \($f.qd) \($f.align)"
    ' "$out_dir/runs.jsonl" "$out_dir/fio.jsonl"
}

# fio_key LABEL (results of earlier versions, one fio per key after all runs): "BACKEND BS QD"
# for LABEL: the typical coalesced read size rounded up to 4 KiB, and its queue depth.
fio_key() {
    local backend bs qd
    backend=$(jq -r --arg l "$1" 'select(.label == $l) | .backend' "$out_dir/runs.jsonl" | head -n1)
    [[ "$backend" == uring || "$backend" == pread ]] || return 0
    bs=$(read_block_vals "$1" | median)
    [[ "$bs" == - ]] && return 0
    bs=$(awk -v b="$bs" 'BEGIN { printf "%d", int((b + 4095) / 4096) * 4096 }')
    qd=$(stat_vals "$1" queue_depth | median)
    if [[ "$qd" == - ]]; then
        [[ "$backend" == uring ]] && qd=$default_qd_uring || qd=$default_qd_pread
    fi
    echo "$backend $bs $(printf %d "$qd")"
}

# fio_mib BACKEND BS QD: MiB/s fio measured for that key, or "-".
fio_mib() {
    [[ -s "$out_dir/fio.jsonl" ]] || { echo -; return; }
    jq -r --arg b "$1" --argjson bs "$2" --argjson qd "$3" 'select(.backend == $b and .bs == $bs and .qd == $qd) | .mib_per_s' \
        "$out_dir/fio.jsonl" | tail -n1 | grep . || echo -
}

report() {
    [[ -s "$out_dir/runs.jsonl" ]] || fail "no runs in $out_dir/runs.jsonl"
    if [[ -z "$overhead_mib" ]]; then
        overhead_mib=$(sed -n 's/^overhead_mib=//p' "$out_dir/machine.txt" 2>/dev/null | tail -n1)
        overhead_mib=${overhead_mib:-$default_overhead_mib}
    fi
    local overhead=$((overhead_mib * 1048576))
    local labels=() label
    mapfile -t labels < <(jq -r '.label' "$out_dir/runs.jsonl" | awk '!seen[$0]++')
    local ram_tps; ram_tps=$(decode_vals "$ram_label" | median)
    local speed_goals=() io_goals=() rss_goals=()
    echo "| config | budget | backend | decode tok/s median (all runs) | vs all-in-RAM | hit rate | bytes read/token | read MiB/s | fio MiB/s same bs/qd | % of fio | peak RSS | budget+KV+scratch+${overhead_mib} MiB | TTFT ms |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for label in "${labels[@]}"; do
        local budget backend config n_ok n_all
        read -r budget backend < <(jq -r --arg l "$label" 'select(.label == $l) | "\(.budget) \(.backend)"' "$out_dir/runs.jsonl" | head -n1)
        config=budget; [[ "$label" == "$ram_label" ]] && config="$ram_label"
        n_all=$(jq -r --arg l "$label" 'select(.label == $l) | .rc' "$out_dir/runs.jsonl" | wc -l)
        n_ok=$(jq -r --arg l "$label" 'select(.label == $l and .rc == 0) | .rc' "$out_dir/runs.jsonl" | wc -l)
        local tps all vs
        tps=$(decode_vals "$label" | median)
        all=$(decode_vals "$label" | sort -g | xargs -r printf "%.2f " | sed 's/ $//')
        (( n_ok < n_all )) && all="${all:+$all; }$((n_all - n_ok)) of $n_all failed"
        vs=$(ratio "$tps" "$ram_tps")
        local budget_bytes; budget_bytes=$(stat_vals "$label" budget_bytes | median)
        if [[ "$budget_bytes" == - && "$budget" == *% ]]; then
            budget_bytes=$(vals "$label" ".file_bytes * (\"${budget%\%}\" | tonumber) / 100" | median)
        fi
        local budget_text="$budget"
        [[ "$budget_bytes" != - ]] && budget_text="$budget ($(fmt_bytes "$budget_bytes"))"
        local read_mib key fio pct="-" fio_text="-" pairs
        read_mib=$(stat_vals "$label" io_read_mib_per_s | median)
        pairs=$(fio_pairs "$label")
        if [[ -n "$pairs" ]]; then
            # Adjacent fio runs: the median of the per-run ratios.
            fio=$(awk '{ print $1 }' <<< "$pairs" | median)
            pct=$(awk '{ print $2 }' <<< "$pairs" | median)
            read -r _ _ kbs kqd kal <<< "$(tail -n1 <<< "$pairs")"
            fio_text="$(fmt "$fio" 0) ($(fmt_bytes "$kbs"), qd $kqd, align $kal)"
        elif [[ -z "$(jq -r 'select(has("label")) | .label' "$out_dir/fio.jsonl" 2>/dev/null | head -n1)" ]] && key=$(fio_key "$label") && [[ -n "$key" ]]; then
            # shellcheck disable=SC2086
            fio=$(fio_mib $key)
            read -r _ kbs kqd <<< "$key"
            [[ "$fio" != - ]] && fio_text="$(fmt "$fio" 0) ($((kbs / 1024))K, qd $kqd)" && pct=$(ratio "$read_mib" "$fio")
        fi
        # Peak RSS: the engine's own figure, and the bound is checked against the larger of it and
        # /usr/bin/time's (both are the kernel's high-water mark; they differ only in when read).
        local rss time_rss worst bound="-" bound_text="-" kv scratch
        rss=$(stat_vals "$label" peak_rss_bytes | max_of)
        time_rss=$(vals "$label" .time_maxrss_bytes | max_of)
        worst=$(printf "%s\n%s\n" "$rss" "$time_rss" | { grep -v '^-$' || true; } | max_of)
        kv=$(stat_vals "$label" kv_cache_bytes | max_of)
        scratch=$(stat_vals "$label" scratch_bytes | max_of)
        [[ "$scratch" == - ]] && scratch=0
        if [[ "$config" == budget && "$budget_bytes" != - && "$kv" != - ]]; then
            bound=$(echo "$budget_bytes + $kv + $scratch + $overhead" | bc)
            local ok="within"; [[ "$worst" != - ]] && (( $(echo "$worst > $bound" | bc) )) && ok="OVER"
            bound_text="$(fmt_bytes "$bound") $ok"
            rss_goals+=("peak RSS $label: $(fmt_bytes "$worst") vs bound $(fmt_bytes "$bound"): $ok")
        fi
        local rss_text; rss_text=$(fmt_bytes "$rss")
        [[ "$rss" == - && "$time_rss" != - ]] && rss_text="$(fmt_bytes "$time_rss") (time -v)"
        local pct_text="-"; [[ "$pct" != - ]] && pct_text="$(fmt "$(echo "$pct * 100" | bc -l)" 0) %"
        [[ "$pct" != - ]] && io_goals+=("read throughput $label: $pct_text of fio (goal >= 80 %): $( (( $(echo "$pct >= 0.8" | bc) )) && echo met || echo missed)")
        if [[ "$budget" == "50%" && "$vs" != - ]]; then
            speed_goals+=("decode at 50% ($backend): $(fmt "$vs" 2)x all-in-RAM (goal >= 0.50x): $( (( $(echo "$vs >= 0.5" | bc) )) && echo met || echo missed)")
        fi
        printf "| %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" \
            "$config" "$budget_text" "$backend" "$(fmt "$tps" 2)" "$all" \
            "$( [[ "$vs" == - ]] && echo - || echo "$(fmt "$vs" 2)x")" \
            "$(fmt_rate "$(stat_vals "$label" cache_hit_rate | median)")" \
            "$(fmt_bytes "$(stat_vals "$label" bytes_read_per_token | median)")" \
            "$(fmt "$read_mib" 1)" "$fio_text" "$pct_text" "$rss_text" "$bound_text" \
            "$(fmt "$(stat_vals "$label" ttft_ms | median)" 0)"
    done
    echo
    echo "Medians over the successful runs; peak RSS is the largest over the runs (engine's peak_rss_bytes)."
    echo "The bound is budget + KV cache + scratch buffers + a stated fixed overhead of ${overhead_mib} MiB"
    echo "(code, libraries, thread stacks, tokenizer, allocator), checked against the larger of the"
    echo "engine's peak RSS and /usr/bin/time's maximum RSS. fio: random O_DIRECT reads of the same"
    echo "file right after each run (median shown); io_uring at the run's queue depth, pread as that"
    echo "many psync jobs; block = the run's read size (median coalesced read, or the mean where only"
    echo "that is reported) rounded up to its read alignment, at offsets aligned like its reads."
    echo "% of fio = median over the runs of (run's read MiB/s / the fio run after it). Read MiB/s is"
    echo "what the run reports (io_read_mib_per_s: bytes read over the time reads were outstanding)."
    echo
    echo "| config | prefill tok/s | read size | queue depth | I/O wait ms/token | resident | minimum budget | KV cache | scratch | max RSS (time -v) | load avg before each run | CPU steal % each run |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for label in "${labels[@]}"; do
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$label" \
            "$(fmt "$(vals "$label" "(.bench.prefill_tokens_per_s // $(stat_of prefill_tokens_per_s))" | median)" 2)" \
            "$(fmt_bytes "$(read_block_vals "$label" | median)")" \
            "$(fmt "$(stat_vals "$label" queue_depth | median)" 0)" \
            "$(fmt "$(stat_vals "$label" io_wait_ms_per_token | median)" 2)" \
            "$(fmt_bytes "$(stat_vals "$label" resident_bytes | median)")" \
            "$(fmt_bytes "$(stat_vals "$label" minimum_budget_bytes | median)")" \
            "$(fmt_bytes "$(stat_vals "$label" kv_cache_bytes | max_of)")" \
            "$(fmt_bytes "$(stat_vals "$label" scratch_bytes | max_of)")" \
            "$(fmt_bytes "$(vals "$label" .time_maxrss_bytes | max_of)")" \
            "$(jq -r --arg l "$label" 'select(.label == $l) | .loadavg_before | split(" ")[0]' "$out_dir/runs.jsonl" | xargs)" \
            "$(jq -r --arg l "$label" 'select(.label == $l) | .steal_pct // "-"' "$out_dir/runs.jsonl" | xargs)"
    done
    if [[ -s "$out_dir/fio.jsonl" ]]; then
        echo
        echo "| fio after | block | align | queue depth (uring) / jobs (pread) | MiB/s | IOPS | p50 latency us | p99 latency us |"
        echo "|---|---|---|---|---|---|---|---|"
        jq -r '"| \(if .label then "\(.label) #\(.round)" else .backend end) | \(.bs) | \(.align // 4096) | \(.qd) | \(.mib_per_s * 10 | round / 10) | \(.iops | round) | \(.p50_us | round) | \(.p99_us | round) |"' \
            "$out_dir/fio.jsonl"
    fi
    local goals=("${speed_goals[@]}" "${io_goals[@]}" "${rss_goals[@]}")
    mapfile -t -O "${#goals[@]}" goals < <(jq -r 'select(.rc != 0) | "\(.label) failed (exit \(.rc)): \(.error // "see raw/*.stderr")"' \
        "$out_dir/runs.jsonl" | awk '!seen[$0]++')
    if (( ${#goals[@]} > 0 )); then
        echo
        printf -- "- %s\n" "${goals[@]}"
    fi
}

# ---------------------------------------------------------------------------------------------

if ! $report_only; then
    [[ -x "$ember" ]] || fail "no ember binary at $ember (run scripts/setup.sh first)"
    [[ -x /usr/bin/time ]] || fail "/usr/bin/time is needed for the RSS cross-check (apt-get install time)"
    $with_fio && ! command -v fio >/dev/null && fail "fio is needed (apt-get install fio), or pass --no-fio"
    if [[ -z "$pack" ]]; then
        ensure_drelu_pack "$preset" "$quant" "$rank" "$predictor_type"
        pack="$drelu_pack"
    fi
    [[ -f "$pack" ]] || fail "no pack at $pack"
    configs=()
    $with_ram && configs+=("$ram_label|-|-")
    for b in $budgets; do
        for be in $backends; do configs+=("$b $be|$b|$be"); done
    done
    (( ${#configs[@]} > 0 )) || fail "nothing to run (no budgets and --no-ram)"

    out_dir="${out_dir:-$repo/bench/results/budget-$(date -u +%Y%m%d-%H%M%S)}"
    mkdir -p "$out_dir/raw"
    {
        machine_facts
        echo "ember_git=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)"
        echo "ember=$ember"
        disk_facts "$pack"
        echo "budgets=$budgets"
        echo "backends=$backends"
        echo "runs=$runs threads=$threads prompt_tokens=$prompt_tokens gen_tokens=$gen_tokens ember_args=$ember_args"
        echo "overhead_mib=${overhead_mib:-$default_overhead_mib}"
        echo "fio=$(command -v fio >/dev/null && fio --version || echo none) fio_runtime_s=$fio_runtime"
    } > "$out_dir/machine.txt"
    log "machine: $(tr '\n' ' ' < "$out_dir/machine.txt")"
    failed_runs=0
    for ((r = 1; r <= runs; ++r)); do
        for c in "${configs[@]}"; do
            IFS='|' read -r label budget backend <<< "$c"
            run_one "$r" "$label" "$budget" "$backend"
        done
    done
    echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$out_dir/machine.txt"
fi

report | tee "$out_dir/table.md"
log "results in $out_dir"
if ! $report_only && (( failed_runs > 0 )); then
    log "$failed_runs run(s) failed; see $out_dir/raw/*.stderr"
    exit 1
fi
