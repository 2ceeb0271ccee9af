#include "core/grammar/grammar.h"

#include <algorithm>
#include <cstdio>

#include "core/grammar/gbnf_text.h"
#include "core/grammar/utf8.h"

namespace ember::grammar {

std::shared_ptr<const Grammar> Grammar::from_rules(RuleSet rules) {
  if (rules.root >= rules.rules.size()) throw GrammarError("the grammar has no root rule");
  for (size_t r = 0; r < rules.rules.size(); ++r) {
    for (const auto& alt : rules.rules[r]) {
      for (const Element& e : alt) {
        if (e.kind == ElementKind::Rule && e.value >= rules.rules.size()) {
          throw GrammarError("rule '" + rules.names[r] + "' refers to an undefined rule");
        }
        if (e.kind == ElementKind::Char && e.value >= rules.char_sets.size()) {
          throw GrammarError("rule '" + rules.names[r] + "' refers to an undefined character set");
        }
        if (e.kind == ElementKind::End) throw GrammarError("rule '" + rules.names[r] + "' holds an End element");
      }
    }
  }
  std::shared_ptr<const Grammar> g(new Grammar(std::move(rules)));
  g->check_left_recursion();
  return g;
}

Grammar::Grammar(RuleSet rules)
    : names_(std::move(rules.names)), char_sets_(std::move(rules.char_sets)), root_(rules.root) {
  alt_begin_.push_back(0);
  for (const auto& alts : rules.rules) {
    for (const auto& seq : alts) {
      alt_starts_.push_back(static_cast<uint32_t>(elements_.size()));
      elements_.insert(elements_.end(), seq.begin(), seq.end());
      elements_.push_back({ElementKind::End, 0});
    }
    alt_begin_.push_back(static_cast<uint32_t>(alt_starts_.size()));
  }
}

// Left recursion makes the parse stack grow without consuming input, so matching would never end;
// llama.cpp refuses it, and so do we. A rule reference that is the last element of its alternative
// pushes no frame (the matcher continues straight into the caller's continuation), so a cycle made
// only of such tail references - what `x*` expands to when x can be empty - ends on its own and is
// allowed. A cycle with at least one non-tail edge is refused.
void Grammar::check_left_recursion() const {
  const size_t n = rule_count();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t start : alternatives(r)) {
        bool all = true;
        for (uint32_t p = start; elements_[p].kind != ElementKind::End; ++p) {
          const Element& e = elements_[p];
          if (e.kind == ElementKind::Char || !nullable[e.value]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }

  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t start : alternatives(r)) {
      for (uint32_t p = start; elements_[p].kind == ElementKind::Rule; ++p) {
        const bool tail = elements_[p + 1].kind == ElementKind::End;
        edges[r].push_back({elements_[p].value, tail});
        if (!nullable[elements_[p].value]) break;
      }
    }
  }

  // Tarjan's strongly connected components, iteratively: grammars may have 100k rules.
  std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1);
  std::vector<char> on_stack(n, 0);
  std::vector<uint32_t> stack;
  struct Frame {
    uint32_t rule;
    size_t next_edge;
  };
  std::vector<Frame> call;
  int32_t counter = 0, components = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    call.push_back({s, 0});
    index[s] = low[s] = counter++;
    stack.push_back(s);
    on_stack[s] = 1;
    while (!call.empty()) {
      Frame& f = call.back();
      if (f.next_edge < edges[f.rule].size()) {
        const uint32_t v = edges[f.rule][f.next_edge++].to;
        if (index[v] < 0) {
          index[v] = low[v] = counter++;
          stack.push_back(v);
          on_stack[v] = 1;
          call.push_back({v, 0});
        } else if (on_stack[v]) {
          low[f.rule] = std::min(low[f.rule], index[v]);
        }
        continue;
      }
      const uint32_t u = f.rule;
      call.pop_back();
      if (!call.empty()) low[call.back().rule] = std::min(low[call.back().rule], low[u]);
      if (low[u] == index[u]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          component[w] = components;
        } while (w != u);
        ++components;
      }
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && component[e.to] == component[r]) {
        throw GrammarError("left recursion: rule '" + names_[r] + "' reaches itself through '" + names_[e.to] +
                           "' before matching any character");
      }
    }
  }
}


std::string Grammar::to_gbnf() const {
  std::string out;
  for (uint32_t r = 0; r < rule_count(); ++r) {
    out += names_[r] + " ::=";
    bool first = true;
    for (uint32_t start : alternatives(r)) {
      out += first ? " " : " | ";
      first = false;
      // An empty alternative as "": a bare trailing `|` would continue onto the next line.
      if (elements_[start].kind == ElementKind::End) out += "\"\"";
      for (uint32_t p = start; elements_[p].kind != ElementKind::End; ++p) {
        if (p != start) out += ' ';
        const Element& e = elements_[p];
        if (e.kind == ElementKind::Rule) {
          out += names_[e.value];
          continue;
        }
        const auto& ranges = char_sets_[e.value].ranges();
        if (ranges.size() == 1 && ranges[0].lo == ranges[0].hi) {
          out += '"';
          append_gbnf_char(out, ranges[0].lo, false);
          out += '"';
          continue;
        }
        out += '[';
        for (const CodeRange& cr : ranges) {
          append_gbnf_char(out, cr.lo, true);
          if (cr.hi != cr.lo) {
            out += '-';
            append_gbnf_char(out, cr.hi, true);
          }
        }
        out += ']';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace ember::grammar
