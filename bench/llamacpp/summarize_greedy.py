"""Agreement lengths for bench/compare_greedy.sh.

usage: summarize_greedy.py PAIRS_JSONL MIN_AGREE OUT_JSON OUT_MD
Exits 1 when any prompt agrees on fewer than MIN_AGREE leading tokens, except when
llama.cpp stopped at an end-of-generation token sooner and Ember reproduced all of it.
"""
import json
import statistics
import sys


def leading_agreement(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def judge(pair, min_agree):
    peer, ember = pair["llamacpp"], pair["ember"]
    agree = leading_agreement(peer, ember)
    short_but_whole = pair["llamacpp_ended_at_eog"] and agree == len(peer)
    return agree, agree >= min_agree or short_but_whole


def main():
    pairs_path, min_agree, out_json, out_md = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(pairs_path, encoding="utf-8") as f:
        pairs = [json.loads(line) for line in f if line.strip()]

    lines = ["| type | prompt | agreement | llama.cpp tokens | ember tokens | llama.cpp top-2 logit gap at divergence | ok |",
             "|---|---|---|---|---|---|---|"]
    per_type = {}
    all_ok = True
    for p in pairs:
        agree, ok = judge(p, min_agree)
        p["agreement"], p["ok"] = agree, ok
        all_ok &= ok
        per_type.setdefault(p["type"], []).append(agree)
        margins = p.get("llamacpp_top2_margins", [])
        gap = f"{margins[agree]:.3g}" if agree < min(len(p["llamacpp"]), len(p["ember"])) and agree < len(margins) else ""
        lines.append(f"| {p['type']} | {p['prompt_index']}: {p['prompt']} | {agree} | "
                     f"{len(p['llamacpp'])} | {len(p['ember'])} | {gap} | {'yes' if ok else 'NO'} |")

    summary = {t: {"min": min(a), "median": statistics.median(a), "agreements": a} for t, a in per_type.items()}
    lines += ["", "| type | min agreement | median agreement |", "|---|---|---|"]
    lines += [f"| {t} | {s['min']} | {s['median']} |" for t, s in summary.items()]
    lines += ["", f"Required: at least {min_agree} leading tokens per prompt: {'PASS' if all_ok else 'FAIL'}",
              "A top-2 gap close to 0 where the engines part (small next to the other gaps in pairs.jsonl)",
              "means a near-tie broken by rounding; a large one means the engines computed different logits."]

    with open(out_json, "w", encoding="utf-8") as f:
        json.dump({"min_agree": min_agree, "pass": all_ok, "summary": summary, "pairs": pairs}, f, indent=2)
        f.write("\n")
    with open(out_md, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
