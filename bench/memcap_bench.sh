#!/usr/bin/env bash
# Ember against llama.cpp under the same memory cap: decode tokens/s, time to first token,
# peak RSS and bytes read from disk of llama.cpp (dense), Ember dense and Ember sparse (predictor,
# neuron cache under --memory-budget) with the whole process, page cache included, confined by a
# cgroup v1 memory limit. A benchmark, not a test: it writes results.json, table.md and gnuplot
# plots under bench/results/memcap-<UTC date>/.
#
# usage: bench/memcap_bench.sh [--preset mistral-7b] [--type Q4_0] [--rank 256] [--predictor-type Q4_0]
#                              [--caps "unlimited 75% 50% 25%"] [--runs 3] [--threads 2]
#                              [--prompts "128 512"] [--gen-tokens 32] [--engines "llama.cpp ember-dense ember-sparse"]
#                              [--repack-check-cap 50%] [--overhead-mib 128] [--timeout 1800]
#                              [--fio-runtime 5] [--no-fio] [--ember PATH] [--out DIR]
#                              [--wait-idle SECONDS] [--report DIR]
#                              [--model GGUF] [--pack PACK] [--prompt-file TEXT] [--no-prefetch-variant]
#                              [--prefetch-variant]
# Caps are percentages of the llama.cpp model file (the SwiGLU GGUF) or sizes (16G, 10G, 900M: GiB
# and MiB), one absolute byte limit shared by every engine; "unlimited" runs in a cgroup without a
# limit (its peak is still recorded).
# --model and --pack take files made beforehand (the Mixtral-8x7B shape takes hours to synthesise
# and profile: bench/README.md) instead of synthesising them from --preset. --prompt-file gives
# both engines the first N tokens of a text (same tokenizer, same ids) instead of a spread of ids:
# a sparse model's speed depends on the text, and the profile behind the pack's hot set must come
# from another text. --no-prefetch-variant adds Ember sparse with --no-prefetch at every cap, and
# --prefetch-variant with --prefetch (an A/B of the prefetch in the same run: its default is on for
# dense packs, off for mixtures of experts).
# The first --prompts size is the decode run (--gen-tokens steps); the others generate one token
# (TTFT only). --report DIR prints an earlier run's tables and redraws its plots.
#
# Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory, drop_caches), gcc, jq,
# python3, fio (unless --no-fio), gnuplot (installed with apt-get when missing and root), and the
# llama.cpp peer (bench/llamacpp/setup.sh, run here). bench/README.md explains every column.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly models_dir="${EMBER_MODELS_DIR:-$cache_root/models}"
preset=mistral-7b
quant=Q4_0
rank=256
predictor_type=Q4_0
caps="unlimited 75% 50% 25%"
runs=3
threads=2
prompts="128 512"
gen_tokens=32
engines="llama.cpp ember-dense ember-sparse"
repack_check_cap=""
overhead_mib=128
timeout_s=1800
fio_runtime=5
with_fio=true
ember="$repo/build/ember"
out_dir=""
wait_idle=0
report_only=false
model_file=""
pack_file=""
prompt_file=""
no_prefetch_variant=false
prefetch_variant=false
readonly cgroup_mount=/sys/fs/cgroup/memory

usage() { sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "memcap_bench.sh: error: $*" >&2; exit 1; }
log() { echo "memcap_bench.sh: $*" >&2; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"
# shellcheck source=bench/llamacpp/synth_model.sh
source "$repo/bench/llamacpp/synth_model.sh"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --preset) preset="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --rank) rank="$2"; shift 2 ;;
        --predictor-type) predictor_type="$2"; shift 2 ;;
        --caps) caps="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompts) prompts="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --engines) engines="$2"; shift 2 ;;
        --repack-check-cap) repack_check_cap="$2"; shift 2 ;;
        --overhead-mib) overhead_mib="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --fio-runtime) fio_runtime="$2"; shift 2 ;;
        --no-fio) with_fio=false; shift ;;
        --ember) ember="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        --report) out_dir="$2"; report_only=true; shift 2 ;;
        --model) model_file="$2"; shift 2 ;;
        --pack) pack_file="$2"; shift 2 ;;
        --prompt-file) prompt_file="$2"; shift 2 ;;
        --no-prefetch-variant) no_prefetch_variant=true; shift ;;
        --prefetch-variant) prefetch_variant=true; shift ;;
        -h|--help) usage ;;
        *) echo "memcap_bench.sh: unknown option '$1'" >&2; usage ;;
    esac
done

positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || fail "$1 must be a positive integer, got '$2'"; }

# Plots need gnuplot: installed when missing and we may (root, apt-get), else the command is shown.
ensure_gnuplot() {
    command -v gnuplot >/dev/null && return 0
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
        log "installing gnuplot-nox for the plots"
        apt-get install -y gnuplot-nox >&2 || log "apt-get install gnuplot-nox failed: no plots"
    else
        log "gnuplot is missing: no plots (install it with: sudo apt-get install -y gnuplot-nox)"
    fi
}

report() {
    ensure_gnuplot
    python3 "$repo/bench/memcap_report.py" "$out_dir"
}

if $report_only; then
    [[ -s "$out_dir/runs.jsonl" ]] || fail "no runs in '$out_dir/runs.jsonl'"
    report
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Arguments and prerequisites

positive --runs "$runs"
positive --threads "$threads"
positive --gen-tokens "$gen_tokens"
positive --timeout "$timeout_s"
positive --fio-runtime "$fio_runtime"
[[ "$overhead_mib" =~ ^[0-9]+$ ]] || fail "--overhead-mib must be a whole number, got '$overhead_mib'"
[[ "$wait_idle" =~ ^[0-9]+$ ]] || fail "--wait-idle must be a number of seconds, got '$wait_idle'"
read -r -a prompt_list <<< "$prompts"
(( ${#prompt_list[@]} > 0 )) || fail "--prompts needs at least one prompt size"
for p in "${prompt_list[@]}"; do positive "a --prompts size" "$p"; done
read -r -a engine_list <<< "$engines"
(( ${#engine_list[@]} > 0 )) || fail "--engines needs at least one engine"
for e in "${engine_list[@]}"; do
    [[ "$e" == llama.cpp || "$e" == ember-dense || "$e" == ember-sparse ]] ||
        fail "--engines takes llama.cpp, ember-dense and ember-sparse, got '$e'"
done
has_engine() { [[ " ${engine_list[*]} " == *" $1 "* ]]; }
read -r -a cap_list <<< "$caps"
(( ${#cap_list[@]} > 0 )) || fail "--caps needs at least one cap"
for c in "${cap_list[@]}"; do
    [[ "$c" == unlimited || "$c" =~ ^[0-9]+(\.[0-9]+)?[%GM]$ ]] ||
        fail "--caps takes 'unlimited', percentages like 50% and sizes like 16G or 900M, got '$c'"
    [[ "$c" == unlimited ]] || (( $(echo "${c%[%GM]} > 0" | bc) )) || fail "a cap must be above 0, got '$c'"
done
if [[ -z "$repack_check_cap" ]]; then
    # The default configuration of both dense engines is tried once at one cap to show what it does there.
    for c in "${cap_list[@]}"; do [[ "$c" == 50% ]] && repack_check_cap=50%; done
    [[ -n "$repack_check_cap" ]] || for c in "${cap_list[@]}"; do
        [[ "$c" != unlimited && -z "$repack_check_cap" ]] && repack_check_cap="$c"
    done
fi
[[ -z "$repack_check_cap" || "$repack_check_cap" == none || "$repack_check_cap" =~ ^[0-9]+(\.[0-9]+)?%$ ]] ||
    fail "--repack-check-cap takes a percentage or 'none', got '$repack_check_cap'"
[[ "$repack_check_cap" == none ]] && repack_check_cap=""

[[ $EUID -eq 0 ]] || fail "needs root: the memory caps are cgroup v1 memory cgroups and the page cache is dropped before every process"
[[ -f "$cgroup_mount/memory.limit_in_bytes" ]] ||
    fail "no cgroup v1 memory controller at $cgroup_mount (cgroup v2-only system?): the caps cannot be enforced, so nothing runs"
[[ -w /proc/sys/vm/drop_caches ]] || fail "/proc/sys/vm/drop_caches is not writable: every process must start with a cold page cache"
for tool in gcc jq bc python3; do command -v "$tool" >/dev/null || fail "'$tool' is needed (apt-get install $tool)"; done
$with_fio && ! command -v fio >/dev/null && fail "fio is needed for the disk figure (apt-get install fio), or pass --no-fio"
[[ -x "$ember" ]] || fail "no ember binary at $ember (build the ember target or pass --ember PATH)"
[[ -z "$model_file" || -f "$model_file" ]] || fail "--model: no file at '$model_file'"
[[ -z "$pack_file" || -f "$pack_file" ]] || fail "--pack: no file at '$pack_file'"
[[ -z "$prompt_file" || -f "$prompt_file" ]] || fail "--prompt-file: no file at '$prompt_file'"
[[ -z "$prompt_file" ]] || prompt_file="$(realpath "$prompt_file")"
ensure_gnuplot

ensure_run_measured  # sets $measure (bench_common.sh)

peer=""
if has_engine llama.cpp; then
    peer="$("$repo/bench/llamacpp/setup.sh")" || fail "bench/llamacpp/setup.sh failed"
fi

# Models: the SwiGLU GGUF (llama.cpp, Ember dense) and the drelu pack with predictors (Ember sparse).
if [[ -n "$model_file" ]]; then
    dense_model="$model_file"
else
    dense_model="$(synth_model "$ember" "$models_dir" "$preset" "$quant")" || fail "no $quant model for preset $preset"
fi
pack=""
if has_engine ember-sparse; then
    if [[ -n "$pack_file" ]]; then
        pack="$pack_file"
    else
        ensure_drelu_pack "$preset" "$quant" "$rank" "$predictor_type"
        pack="$drelu_pack"  # set by ensure_drelu_pack (bench_common.sh)
    fi
    [[ -f "$pack" ]] || fail "no pack at $pack"
fi
dense_bytes=$(stat -c %s "$dense_model")

out_dir="${out_dir:-$repo/bench/results/memcap-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out_dir/raw"

# ---------------------------------------------------------------------------------------------
# Memory cgroups: one per cap, nested under the cgroup this script runs in (so limits set above it
# still apply and nothing outside it is touched), removed on exit, Ctrl-C included.

own_cgroup=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
[[ -n "$own_cgroup" ]] || fail "this process is in no cgroup v1 memory hierarchy (/proc/self/cgroup)"
cgroup_parent="$cgroup_mount${own_cgroup%/}"
[[ -d "$cgroup_parent" && -w "$cgroup_parent" ]] || fail "cannot create cgroups under $cgroup_parent"
declare -A cgroup_of=()
declare -A cap_bytes_of=()
created_cgroups=()

remove_cgroups() {
    local cg pid _
    for cg in "${created_cgroups[@]}"; do
        [[ -d "$cg" ]] || continue
        # Anything still inside was started by this script (a run interrupted by Ctrl-C).
        while read -r pid; do
            if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
        done < "$cg/cgroup.procs"
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            rmdir "$cg" 2>/dev/null && break
            sleep 0.5
        done
        [[ -d "$cg" ]] && log "warning: could not remove cgroup $cg (rmdir it by hand)"
    done
    created_cgroups=()
}
trap remove_cgroups EXIT
trap 'log "interrupted"; exit 130' INT TERM

# cap_bytes CAP: the byte limit for a cap ("unlimited": none).
cap_bytes() {
    case "$1" in
        unlimited) echo unlimited ;;
        *G) echo "${1%G} * 1073741824 / 1" | bc ;;
        *M) echo "${1%M} * 1048576 / 1" | bc ;;
        *) echo "$dense_bytes * ${1%\%} / 100" | bc ;;
    esac
}
slug() { echo "$1" | sed 's/%/pct/g; s/[^A-Za-z0-9._-]\{1,\}/-/g'; }
# The prompt options of each engine: the text's first tokens when --prompt-file is given.
peer_prompt=() ember_prompt=()
[[ -n "$prompt_file" ]] && { peer_prompt=(--prompt-file "$prompt_file"); ember_prompt=(--prompt-file "$prompt_file"); }

make_cgroup() {
    local cap=$1 cg bytes
    cg="$cgroup_parent/ember-memcap-$$-$(slug "$cap")"
    mkdir "$cg" || fail "could not create cgroup $cg"
    created_cgroups+=("$cg")
    bytes=$(cap_bytes "$cap")
    if [[ "$bytes" != unlimited ]]; then
        # memory first: memsw (memory + swap) may never be below it.
        echo "$bytes" > "$cg/memory.limit_in_bytes" || fail "could not set memory.limit_in_bytes of $cg"
        [[ -f "$cg/memory.memsw.limit_in_bytes" ]] && { echo "$bytes" > "$cg/memory.memsw.limit_in_bytes" ||
            fail "could not set memory.memsw.limit_in_bytes of $cg"; }
        local got; got=$(cat "$cg/memory.limit_in_bytes")
        # The kernel rounds the limit down to whole pages.
        (( got <= bytes && got > bytes - 4096 * 2 )) || fail "cgroup $cg took limit $got for $bytes bytes"
    fi
    cgroup_of[$cap]=$cg
    cap_bytes_of[$cap]=$bytes
}

# Zeroes the high-water mark and the limit-hit counter so that each run reports its own.
reset_cgroup() {
    local cg=$1 f
    for f in memory.max_usage_in_bytes memory.failcnt memory.memsw.max_usage_in_bytes memory.memsw.failcnt \
             memory.kmem.max_usage_in_bytes; do
        [[ -f "$cg/$f" ]] && echo 0 > "$cg/$f"
    done
    return 0
}

for c in "${cap_list[@]}"; do make_cgroup "$c"; done
[[ -n "$repack_check_cap" && -z "${cgroup_of[$repack_check_cap]:-}" ]] && make_cgroup "$repack_check_cap"


# ---------------------------------------------------------------------------------------------
# Ember sparse's budget: cap - KV cache - scratch - fixed overhead, the KV cache and scratch taken
# from the engine itself by a short probe (all in RAM, one-token prompt, the largest context and
# batch the runs use), so that the whole process, page cache included, fits under the cap.

max_prompt=$(printf "%s\n" "${prompt_list[@]}" | sort -n | tail -n1)
probe_ctx=$((max_prompt + gen_tokens + 1))
probe_batch=$(( max_prompt > 512 ? max_prompt : 512 ))  # ember bench batches min(512 default, prompt) up
kv_bytes=0 scratch_bytes=0
if has_engine ember-sparse; then
    # Under a budget (the smallest cap's bytes: sizes only), as the capped runs: the scratch differs
    # from all in RAM, and a pack larger than this machine's memory cannot be probed all in RAM.
    probe_budget=()
    for c in "${cap_list[@]}"; do
        b=${cap_bytes_of[$c]}
        [[ "$b" == unlimited ]] && continue
        if (( ${#probe_budget[@]} == 0 )) || (( b < probe_budget[1] )); then probe_budget=(--memory-budget "$b"); fi
    done
    log "probing Ember's KV cache and scratch sizes on $pack ${probe_budget[*]}"
    drop_page_cache
    "$ember" bench -m "$pack" -t "$threads" --sparse predictor -c "$probe_ctx" -b "$probe_batch" "${probe_budget[@]}" \
        --prompt-tokens 1 --gen-tokens 1 --runs 1 --json --stats-json "$out_dir/probe.stats.json" \
        > "$out_dir/raw/probe.stdout" 2> "$out_dir/raw/probe.stderr" ||
        fail "the Ember probe failed; see $out_dir/raw/probe.stderr"
    kv_bytes=$(jq -r '.kv_cache_bytes' "$out_dir/probe.stats.json")
    scratch_bytes=$(jq -r '.scratch_bytes' "$out_dir/probe.stats.json")
    [[ "$kv_bytes" =~ ^[0-9]+$ && "$scratch_bytes" =~ ^[0-9]+$ ]] ||
        fail "the probe's stats lack kv_cache_bytes / scratch_bytes ($out_dir/probe.stats.json)"
fi
# sparse_budget CAP: the --memory-budget for Ember sparse under CAP, or "-" when nothing is left.
sparse_budget() {
    local bytes=${cap_bytes_of[$1]} b
    [[ "$bytes" == unlimited ]] && { echo -; return; }
    b=$((bytes - kv_bytes - scratch_bytes - overhead_mib * 1048576))
    (( b > 0 )) && echo "$b" || echo -
}

# ---------------------------------------------------------------------------------------------
# The plan: ENGINE|VARIANT|CAP|PROMPT|GEN|CHECK per process of a round.

entries=()
checks=()
first_prompt=${prompt_list[0]}
for c in "${cap_list[@]}"; do
    for p in "${prompt_list[@]}"; do
        g=1; [[ "$p" == "$first_prompt" ]] && g=$gen_tokens
        if has_engine llama.cpp; then
            # Uncapped, repacking (its default) is fastest; capped, repacking copies the weights into
            # anonymous memory the cap cannot reclaim, so mmap without repacking is its best.
            [[ "$c" == unlimited ]] && entries+=("llama.cpp|repack|$c|$p|$g|0")
            entries+=("llama.cpp|mmap|$c|$p|$g|0")
        fi
        if has_engine ember-dense; then
            if [[ "$c" == unlimited ]]; then entries+=("ember-dense|repack|$c|$p|$g|0")
            else entries+=("ember-dense|no-repack|$c|$p|$g|0"); fi
        fi
        if has_engine ember-sparse; then
            if [[ "$c" == unlimited ]]; then entries+=("ember-sparse|all-in-RAM|$c|$p|$g|0")
            else
                entries+=("ember-sparse|budget|$c|$p|$g|0")
                $no_prefetch_variant && entries+=("ember-sparse|budget-no-prefetch|$c|$p|$g|0")
                $prefetch_variant && entries+=("ember-sparse|budget-prefetch|$c|$p|$g|0")
            fi
        fi
    done
done
if [[ -n "$repack_check_cap" ]]; then
    has_engine llama.cpp && checks+=("llama.cpp|repack|$repack_check_cap|$first_prompt|$gen_tokens|1")
    has_engine ember-dense && checks+=("ember-dense|repack|$repack_check_cap|$first_prompt|$gen_tokens|1")
fi

# ---------------------------------------------------------------------------------------------
# Running

json_or_null() { { [[ -s "$1" ]] && jq -cs '.[0]' "$1" 2>/dev/null; } || echo null; }

run_one() {
    local round=$1 entry=$2 engine variant cap p g check
    IFS='|' read -r engine variant cap p g check <<< "$entry"
    local base; base="$out_dir/raw/r$round-$engine-$variant-$(slug "$cap")-p$p"
    local cg=${cgroup_of[$cap]} budget=- cmd=()
    case "$engine" in
        llama.cpp)
            cmd=("$peer" bench -m "$dense_model" -t "$threads" -p "$p" -n "$g" -r 1 --mmap "${peer_prompt[@]}")
            [[ "$variant" == mmap ]] && cmd+=(--no-repack) ;;
        ember-dense)
            cmd=("$ember" bench -m "$dense_model" -t "$threads" -c $((p + g + 1)) --prompt-tokens "$p"
                 --gen-tokens "$g" --runs 1 --json "${ember_prompt[@]}")
            [[ "$variant" == no-repack ]] && cmd+=(--no-repack) ;;
        ember-sparse)
            cmd=("$ember" bench -m "$pack" -t "$threads" --sparse predictor -c $((p + g + 1)) --prompt-tokens "$p"
                 --gen-tokens "$g" --runs 1 --json --stats-json "$base.stats.json" "${ember_prompt[@]}")
            if [[ "$variant" == budget* ]]; then
                budget=$(sparse_budget "$cap")
                cmd+=(--memory-budget "$budget" --io-backend auto)
                [[ "$variant" == budget-no-prefetch ]] && cmd+=(--no-prefetch)
                [[ "$variant" == budget-prefetch ]] && cmd+=(--prefetch)
            fi ;;
    esac
    rm -f "$base.stats.json" "$base.measure.json"
    local rc=0 error="" load_before usage_before
    if [[ "$budget" == - && "$variant" == budget* ]]; then
        rc=-1
        error="cap ${cap_bytes_of[$cap]} B leaves no budget after KV cache $kv_bytes B, scratch $scratch_bytes B and ${overhead_mib} MiB overhead"
        : > "$base.stdout"
    else
        wait_for_idle
        drop_page_cache
        reset_cgroup "$cg"
        usage_before=$(cat "$cg/memory.usage_in_bytes")
        load_before="$(cut -d' ' -f1-4 /proc/loadavg)"
        "$measure" -o "$base.measure.json" --cgroup "$cg" --timeout "$timeout_s" -- "${cmd[@]}" \
            > "$base.stdout" 2> "$base.stderr" || rc=$?
        if (( rc != 0 )); then
            error=$(grep -i 'error\|killed\|failed\|could not' "$base.stderr" | tail -n1 | cut -c1-300 || true)
            (( rc == 137 )) && error="killed by SIGKILL${error:+ ($error)}"
        fi
    fi
    grep '^{' "$base.stdout" | tail -n1 > "$base.bench.json" || true
    jq -cn --argjson round "$round" --arg engine "$engine" --arg variant "$variant" --arg cap "$cap" \
        --arg cap_bytes "${cap_bytes_of[$cap]}" --argjson prompt "$p" --argjson gen "$g" \
        --argjson check "$( (( check )) && echo true || echo false)" --arg budget "$budget" \
        --argjson rc "$rc" --argjson bench "$(json_or_null "$base.bench.json")" \
        --argjson stats "$(json_or_null "$base.stats.json")" --argjson measure "$(json_or_null "$base.measure.json")" \
        --arg usage_before "${usage_before:-}" --arg load_before "${load_before:-}" \
        --arg load_after "$(cut -d' ' -f1-4 /proc/loadavg)" --arg command "${cmd[*]}" --arg error "$error" \
        '{round: $round, engine: $engine, variant: $variant, cap: $cap,
          cap_bytes: ($cap_bytes | tonumber? // null), prompt_tokens: $prompt, gen_tokens: $gen, check: $check,
          budget_bytes: ($budget | tonumber? // null), rc: $rc, bench: $bench, stats: $stats, measure: $measure,
          cgroup_usage_before_bytes: ($usage_before | tonumber? // null), loadavg_before: $load_before,
          loadavg_after: $load_after, command: $command, error: (if $error == "" then null else $error end)}' \
        >> "$out_dir/runs.jsonl"
    local summary
    summary=$(tail -n1 "$out_dir/runs.jsonl" | jq -r 'def r2: if type == "number" then . * 100 | round / 100 else . end;
        if .rc == 0 then "decode \(.bench.decode_tokens_per_s | r2) tok/s, prefill \(.bench.prefill_tokens_per_s | r2) tok/s, \(.measure.wall_s | r2) s, read \((.measure.io.read_bytes // 0) / 1048576 | round) MiB, cgroup peak \((.measure.cgroup.max_usage_bytes // 0) / 1048576 | round) MiB, steal \(.measure.steal_pct // "-")%"
        else "FAILED (exit \(.rc)): \(.error // "see raw/")" end')
    log "round $round: $engine $variant @ $cap, prompt $p: $summary"
}

# fio_run PHASE BS: random O_DIRECT reads of the model file at queue depth 32 (io_uring).
run_fio() {
    local phase=$1 bs=$2 name="fio-$1-bs$2"
    local args=(--name="$name" --filename="$dense_model" --rw=randread --bs="$bs" --direct=1 --readonly
                --ioengine=io_uring --iodepth=32 --runtime="$fio_runtime" --time_based --output-format=json)
    wait_for_idle
    if ! fio "${args[@]}" > "$out_dir/raw/$name.json" 2> "$out_dir/raw/$name.stderr"; then
        log "fio failed ($phase, $bs): $(tail -n 2 "$out_dir/raw/$name.stderr" | tr '\n' ' ')"
        return 0
    fi
    jq -c --arg phase "$phase" --argjson bs "$bs" --arg cmd "fio ${args[*]}" \
        '.jobs[0].read as $r | {phase: $phase, bs: $bs, qd: 32, mib_per_s: ($r.bw_bytes / 1048576), iops: $r.iops,
          p50_us: ($r.clat_ns.percentile["50.000000"] / 1000), p99_us: ($r.clat_ns.percentile["99.000000"] / 1000),
          command: $cmd}' "$out_dir/raw/$name.json" >> "$out_dir/fio.jsonl"
    log "fio $phase ${bs}B qd32: $(tail -n1 "$out_dir/fio.jsonl" | jq -r '"\(.mib_per_s | round) MiB/s, \(.iops | round) IOPS"')"
}

{
    machine_facts
    echo "ember_git=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "ember=$ember"
    echo "llamacpp=node-llama-cpp@3.21.1 (llama.cpp v0.4.0) ${peer:-not run}"
    disk_facts "$dense_model"
    # Every disk with a size (empty zram devices and the like left out): name, size, rotational, model.
    echo "lsblk=$(lsblk -d -n -b -o NAME,SIZE,ROTA,MODEL 2>/dev/null |
        awk '$2 > 0 { m = ""; for (i = 4; i <= NF; ++i) m = m " " $i
                      printf "%s%s %.0f GiB rotational=%s%s", sep, $1, $2 / 1073741824, $3, m; sep = "; " }')"
} > "$out_dir/machine.txt"
jq -n --arg preset "$preset" --arg quant "$quant" --arg dense "$dense_model" --argjson dense_bytes "$dense_bytes" \
    --arg pack "$pack" --arg pack_bytes "$( [[ -n "$pack" ]] && stat -c %s "$pack" || echo)" \
    --arg caps "${cap_list[*]}" --arg prompts "${prompt_list[*]}" --argjson gen "$gen_tokens" \
    --argjson runs "$runs" --argjson threads "$threads" --argjson overhead_mib "$overhead_mib" \
    --argjson kv "$kv_bytes" --argjson scratch "$scratch_bytes" --arg check_cap "$repack_check_cap" \
    --argjson timeout "$timeout_s" --arg cgroup_parent "$cgroup_parent" --arg prompt_file "${prompt_file:-synthetic}" \
    --argjson model_given "$( [[ -n "$model_file" ]] && echo true || echo false)" \
    --argjson cap_bytes "$(for c in "${cap_list[@]}"; do jq -n --arg c "$c" --arg b "${cap_bytes_of[$c]}" \
        --arg s "$(sparse_budget "$c")" '{cap: $c, bytes: ($b | tonumber? // null), sparse_budget_bytes: ($s | tonumber? // null)}'; done | jq -s .)" \
    '{preset: $preset, type: $quant, dense_model: $dense, dense_model_bytes: $dense_bytes, pack: $pack,
      pack_bytes: ($pack_bytes | tonumber? // null), caps: $cap_bytes, prompts: ($prompts | split(" ") | map(tonumber)),
      gen_tokens: $gen, runs: $runs, threads: $threads, overhead_mib: $overhead_mib,
      probe: {kv_cache_bytes: $kv, scratch_bytes: $scratch}, repack_check_cap: $check_cap,
      timeout_s: $timeout, cgroup_parent: $cgroup_parent, prompt: $prompt_file,
      model_given: $model_given}' > "$out_dir/settings.json"
log "machine: $(tr '\n' ' ' < "$out_dir/machine.txt")"
log "prompt: ${prompt_file:-a spread of token ids (synthetic)}"
log "caps (of $dense_bytes B, the llama.cpp file): $(for c in "${cap_list[@]}"; do printf '%s=%s ' "$c" "${cap_bytes_of[$c]}"; done)"
has_engine ember-sparse && log "Ember sparse budgets (cap - KV $kv_bytes - scratch $scratch_bytes - ${overhead_mib} MiB): $(for c in "${cap_list[@]}"; do printf '%s=%s ' "$c" "$(sparse_budget "$c")"; done)"

if $with_fio; then for bs in 4096 16384; do run_fio start "$bs"; done; fi
started=$SECONDS
total=$(( ${#entries[@]} * runs + ${#checks[@]} ))
n=0
for ((r = 1; r <= runs; ++r)); do
    # Each round starts one entry later, so no configuration always runs first or after the same one.
    count=${#entries[@]}
    for ((i = 0; i < count; ++i)); do
        n=$((n + 1))
        log "[$n/$total, $(( (SECONDS - started) / 60 )) min]"
        run_one "$r" "${entries[$(( (i + r - 1) % count ))]}"
    done
    if (( r == 1 )); then
        for e in "${checks[@]}"; do n=$((n + 1)); run_one 1 "$e"; done
    fi
done
if $with_fio; then for bs in 4096 16384; do run_fio end "$bs"; done; fi
echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$out_dir/machine.txt"
echo "duration_s=$((SECONDS - started))" >> "$out_dir/machine.txt"
remove_cgroups

report
log "results in $out_dir ($(( (SECONDS - started) / 60 )) min)"
