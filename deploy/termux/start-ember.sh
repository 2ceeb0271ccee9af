#!/data/data/com.termux/files/usr/bin/sh
# Starts the Ember daemon when the phone boots, through the Termux:Boot add-on.
# Install: mkdir -p ~/.termux/boot && cp start-ember.sh ~/.termux/boot/ && chmod 700 ~/.termux/boot/start-ember.sh
# (then open the Termux:Boot app once so Android lets it run at boot). Running it by hand works too.
#
# Listens on a Unix socket, $PREFIX/var/run/ember.sock, and on loopback TCP (127.0.0.1, port from
# the config or EMBER_PORT, default 8080), never on Wi-Fi interfaces. Logs go to
# $PREFIX/var/log/ember.log (the previous log is kept as ember.log.1).
#
# Settings, all optional: ~/.config/ember/ember.json (the config file, see config/README.md),
# or variables such as EMBER_MODEL, EMBER_THREADS, EMBER_PORT exported in ~/.config/ember/env.
# EMBER_BIN names the binary (default $PREFIX/bin/ember).
set -eu

PREFIX="${PREFIX:-/data/data/com.termux/files/usr}"
ember="${EMBER_BIN:-$PREFIX/bin/ember}"
config="${EMBER_CONFIG:-$HOME/.config/ember/ember.json}"
env_file="$HOME/.config/ember/env"
run_dir="$PREFIX/var/run"
log_dir="$PREFIX/var/log"
log="$log_dir/ember.log"
pid_file="$run_dir/ember.pid"
socket="$run_dir/ember.sock"

mkdir -p "$run_dir" "$log_dir"

# One daemon only: a boot script may also be run by hand later.
if [ -f "$pid_file" ]; then
    old_pid="$(cat "$pid_file" 2>/dev/null || true)"
    if [ -n "$old_pid" ] && kill -0 "$old_pid" 2>/dev/null &&
        tr '\0' ' ' < "/proc/$old_pid/cmdline" 2>/dev/null | grep -q 'ember serve'; then
        echo "start-ember.sh: ember is already running (pid $old_pid)" >&2
        exit 0
    fi
    rm -f "$pid_file"
fi

if [ ! -x "$ember" ]; then
    echo "start-ember.sh: no ember binary at $ember (build it in Termux, see deploy/README.md)" >> "$log"
    exit 1
fi

# Keep the CPU awake while the daemon runs; Android would otherwise suspend it in the middle of
# a generation. `termux-wake-unlock` releases it (the Termux notification shows the lock).
if command -v termux-wake-lock >/dev/null 2>&1; then
    termux-wake-lock
fi

# shellcheck source=/dev/null
[ -f "$env_file" ] && . "$env_file"

# Keep one previous log; the daemon's log is small (start-up, warnings, errors).
[ -f "$log" ] && mv -f "$log" "$log.1"

set -- serve --host 127.0.0.1 --listen "unix:$socket"
[ -f "$config" ] && set -- "$@" --config "$config"

echo "start-ember.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ) starting $ember $*" >> "$log"
# nohup + background: Termux:Boot runs its scripts one after another and expects them to return.
nohup "$ember" "$@" >> "$log" 2>&1 < /dev/null &
echo $! > "$pid_file"
echo "start-ember.sh: started ember (pid $!), log $log, socket $socket" >&2
