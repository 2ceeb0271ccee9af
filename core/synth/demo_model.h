#pragma once
// The built-in demo model: what `ember run` (and later `ember serve`) use when no model is given.
// It is a synthetic model (`ember synth --preset tiny --type Q8_0`, fixed seed), written once into
// the cache folder and reused; its text is fluent-looking nonsense, enough to try the plumbing.
#include <string>

namespace ember::synth {

// $EMBER_CACHE, else $XDG_CACHE_HOME/ember, else $HOME/.cache/ember, else /tmp/ember-cache.
std::string cache_dir();

// Path of the demo model, creating it (atomically: temp file + rename) when it is missing.
// `created` tells the caller whether it was just written.
std::string ensure_demo_model(bool* created = nullptr);

}  // namespace ember::synth
