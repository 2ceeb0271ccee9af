#pragma once
// The built-in English material the synthetic vocabulary is learned from: common words in rough
// frequency order, and syllable parts for the pseudo-words that fill the rest of a large vocabulary.
#include <span>
#include <string_view>

namespace ember::synth {

std::span<const std::string_view> common_english_words();  // most frequent first
std::span<const std::string_view> syllable_onsets();
std::span<const std::string_view> syllable_nuclei();
std::span<const std::string_view> syllable_codas();
std::span<const std::string_view> word_suffixes();

}  // namespace ember::synth
