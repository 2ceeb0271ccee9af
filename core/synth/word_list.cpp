#include "core/synth/word_list.h"

#include <array>

namespace ember::synth {

namespace {
using sv = std::string_view;

constexpr sv kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
    "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not",
    "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up",
    "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will",
    "way", "about", "many", "then", "them", "write", "would", "like", "so", "these", "her", "long",
    "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go", "come", "did",
    "number", "sound", "no", "most", "people", "my", "over", "know", "water", "than", "call", "first",
    "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part", "take", "get",
    "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year", "came",
    "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just", "form",
    "sentence", "great", "think", "say", "help", "low", "line", "differ", "turn", "cause", "much",
    "mean", "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set", "three",
    "want", "air", "well", "also", "play", "small", "end", "put", "home", "read", "hand", "port",
    "large", "spell", "add", "even", "land", "here", "must", "big", "high", "such", "follow", "act",
    "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house", "picture", "try",
    "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth", "father",
    "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow", "study",
    "still", "learn", "plant", "cover", "food", "sun", "four", "between", "state", "keep", "eye",
    "never", "last", "let", "thought", "city", "tree", "cross", "farm", "hard", "start", "might",
    "story", "saw", "far", "sea", "draw", "left", "late", "run", "while", "press", "close", "night",
    "real", "life", "few", "north", "open", "seem", "together", "next", "white", "children", "begin",
    "got", "walk", "example", "ease", "paper", "group", "always", "music", "those", "both", "mark",
    "often", "letter", "until", "mile", "river", "car", "feet", "care", "second", "book", "carry",
    "took", "science", "eat", "room", "friend", "began", "idea", "fish", "mountain", "stop", "once",
    "base", "hear", "horse", "cut", "sure", "watch", "color", "face", "wood", "main", "enough",
    "plain", "girl", "usual", "young", "ready", "above", "ever", "red", "list", "though", "feel",
    "talk", "bird", "soon", "body", "dog", "family", "direct", "pose", "leave", "song", "measure",
    "door", "product", "black", "short", "numeral", "class", "wind", "question", "happen", "complete",
    "ship", "area", "half", "rock", "order", "fire", "south", "problem", "piece", "told", "knew",
    "pass", "since", "top", "whole", "king", "space", "heard", "best", "hour", "better", "true",
    "during", "hundred", "five", "remember", "step", "early", "hold", "west", "ground", "interest",
    "reach", "fast", "verb", "sing", "listen", "six", "table", "travel", "less", "morning", "ten",
    "simple", "several", "vowel", "toward", "war", "lay", "against", "pattern", "slow", "center",
    "love", "person", "money", "serve", "appear", "road", "map", "rain", "rule", "govern", "pull",
    "cold", "notice", "voice", "unit", "power", "town", "fine", "certain", "fly", "fall", "lead",
    "cry", "dark", "machine", "note", "wait", "plan", "figure", "star", "box", "noun", "field",
    "rest", "correct", "able", "pound", "done", "beauty", "drive", "stood", "contain", "front",
    "teach", "week", "final", "gave", "green", "oh", "quick", "develop", "ocean", "warm", "free",
    "minute", "strong", "special", "mind", "behind", "clear", "tail", "produce", "fact", "street",
    "inch", "multiply", "nothing", "course", "stay", "wheel", "full", "force", "blue", "object",
    "decide", "surface", "deep", "moon", "island", "foot", "system", "busy", "test", "record", "boat",
    "common", "gold", "possible", "plane", "stead", "dry", "wonder", "laugh", "thousand", "ago",
    "ran", "check", "game", "shape", "equate", "hot", "miss", "brought", "heat", "snow", "tire",
    "bring", "yes", "distant", "fill", "east", "paint", "language", "among", "once", "upon", "princess",
    "little", "girl", "named", "lily", "loved", "play", "outside", "happy", "sad", "smiled", "park",
    "ball", "tree", "cat", "dragon", "castle", "forest", "magic", "queen", "village", "garden",
    "model", "engine", "memory", "token", "computer", "data", "file", "phone", "device", "network",
};

constexpr sv kOnsets[] = {"",   "b",  "c",  "d",  "f",  "g",  "h",  "j",  "k",  "l",  "m",  "n",
                          "p",  "r",  "s",  "t",  "v",  "w",  "y",  "z",  "bl", "br", "ch", "cl",
                          "cr", "dr", "fl", "fr", "gr", "pl", "pr", "sh", "sl", "sp", "st", "str",
                          "th", "tr", "wh", "qu", "sc", "sm", "sn", "sw", "gl", "kn"};
constexpr sv kNuclei[] = {"a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ee", "oo", "ou", "ie", "oa", "y"};
constexpr sv kCodas[] = {"",   "",   "",   "n",  "r",  "s",  "t",  "l",  "m",  "nd", "nt", "st",
                         "ng", "ck", "ll", "rt", "rd", "sh", "ch", "th", "p",  "d",  "g",  "x"};
constexpr sv kSuffixes[] = {"", "", "", "", "s", "ed", "ing", "er", "ly", "tion", "ness", "ment", "able", "est", "ful", "ous"};
}  // namespace

std::span<const std::string_view> common_english_words() { return kWords; }
std::span<const std::string_view> syllable_onsets() { return kOnsets; }
std::span<const std::string_view> syllable_nuclei() { return kNuclei; }
std::span<const std::string_view> syllable_codas() { return kCodas; }
std::span<const std::string_view> word_suffixes() { return kSuffixes; }

}  // namespace ember::synth
