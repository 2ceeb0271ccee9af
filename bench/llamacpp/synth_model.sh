# Sourced by bench/core_bench.sh and bench/compare_greedy.sh.
#
# synth_model EMBER_BIN DIR PRESET TYPE: prints the path of the synthetic model
# DIR/synth-PRESET-TYPE.gguf, first making it with `ember synth` when it is not cached.
# Synthesis writes to a temporary name so an interrupted run never leaves a truncated
# file that later runs would trust.
synth_model() {
    local ember="$1" dir="$2" preset="$3" type="$4"
    local file="$dir/synth-$preset-$type.gguf"
    if [[ ! -s "$file" ]]; then
        [[ -x "$ember" ]] || {
            echo "synth_model: $file is not cached and no Ember binary at $ember can make it" >&2
            return 1
        }
        mkdir -p "$dir"
        echo "synth_model: making $file" >&2
        "$ember" synth --preset "$preset" --type "$type" -o "$file.part" >&2 || {
            rm -f "$file.part"
            echo "synth_model: ember synth --preset $preset --type $type failed" >&2
            return 1
        }
        mv "$file.part" "$file"
    fi
    echo "$file"
}
