# Shared by the benchmark scripts (sourced, not run): machine facts and waiting for a quiet
# machine. The caller defines log() and sets $repo and $wait_idle (seconds; 0: do not wait).

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
