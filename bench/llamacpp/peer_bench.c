// peer_bench: the llama.cpp side of Ember's benchmarks and greedy comparisons.
//
// Built by bench/llamacpp/setup.sh against the prebuilt llama.cpp shipped in
// npm node-llama-cpp@3.21.1 (llama.cpp release v0.4.0), so that Ember is always
// compared with one fixed, reproducible build of its peer.
//
//   peer_bench bench  -m MODEL [-t THREADS] [-p 512] [-n 64] [-r 1] [--no-repack] [--mmap|--no-mmap]
//                     [--prompt-file TEXT_FILE]
//   peer_bench greedy -m MODEL [-t THREADS] [-n 32] -p "prompt text"
//
// Each mode prints exactly one JSON line on stdout; llama.cpp's own log goes to
// stderr only with -v.

#include "llama.h"
#include "ggml-backend.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_RUNS = 100 };

#ifndef PEER_BACKEND_DIR
#define PEER_BACKEND_DIR "."
#endif

enum peer_mode { MODE_BENCH, MODE_GREEDY };

struct peer_options {
    enum peer_mode mode;
    const char * model_path;
    const char * prompt_text;  // greedy only
    const char * prompt_file;  // bench only: NULL for the synthetic prompt
    int threads;
    int prompt_tokens;         // bench only
    int gen_tokens;
    int runs;                  // bench only: timed runs after the warm-up
    bool repack;
    bool mmap;
    bool verbose;
};

static void usage(void) {
    fprintf(stderr,
        "usage:\n"
        "  peer_bench bench  -m MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [-r RUNS] [--no-repack] [--mmap|--no-mmap]\n"
        "                    [--prompt-file TEXT_FILE] [-v]\n"
        "  peer_bench greedy -m MODEL [-t THREADS] [-n GEN_TOKENS] -p \"prompt text\" [-v]\n"
        "env: EMBER_LLAMACPP_LIBDIR overrides the directory the ggml CPU backends are loaded from\n");
}

static bool parse_positive_int(const char * text, int * out) {
    char * end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value <= 0 || value > 1000000) {
        return false;
    }
    *out = (int) value;
    return true;
}

// Returns false (after printing why) on any malformed command line.
static bool parse_options(int argc, char ** argv, struct peer_options * opt) {
    if (argc < 2) {
        usage();
        return false;
    }
    if (strcmp(argv[1], "bench") == 0) {
        opt->mode = MODE_BENCH;
    } else if (strcmp(argv[1], "greedy") == 0) {
        opt->mode = MODE_GREEDY;
    } else {
        fprintf(stderr, "peer_bench: unknown mode '%s'\n", argv[1]);
        usage();
        return false;
    }
    opt->model_path = NULL;
    opt->prompt_text = NULL;
    opt->prompt_file = NULL;
    opt->threads = 2;
    opt->prompt_tokens = 512;
    opt->gen_tokens = opt->mode == MODE_BENCH ? 64 : 32;
    opt->runs = 1;
    opt->repack = true;
    opt->mmap = true;
    opt->verbose = false;

    for (int i = 2; i < argc; ++i) {
        const char * arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (strcmp(arg, "--no-repack") == 0) {
            opt->repack = false;
        } else if (strcmp(arg, "--mmap") == 0) {
            opt->mmap = true;
        } else if (strcmp(arg, "--no-mmap") == 0) {
            opt->mmap = false;
        } else if (strcmp(arg, "-v") == 0) {
            opt->verbose = true;
        } else if (strcmp(arg, "--prompt-file") == 0 && has_value && opt->mode == MODE_BENCH) {
            opt->prompt_file = argv[++i];
        } else if (strcmp(arg, "-m") == 0 && has_value) {
            opt->model_path = argv[++i];
        } else if (strcmp(arg, "-t") == 0 && has_value) {
            if (!parse_positive_int(argv[++i], &opt->threads)) {
                fprintf(stderr, "peer_bench: bad thread count '%s'\n", argv[i]);
                return false;
            }
        } else if (strcmp(arg, "-r") == 0 && has_value) {
            if (!parse_positive_int(argv[++i], &opt->runs) || opt->runs > MAX_RUNS) {
                fprintf(stderr, "peer_bench: bad run count for -r '%s' (1..%d)\n", argv[i], MAX_RUNS);
                return false;
            }
        } else if (strcmp(arg, "-n") == 0 && has_value) {
            if (!parse_positive_int(argv[++i], &opt->gen_tokens)) {
                fprintf(stderr, "peer_bench: bad token count for -n '%s'\n", argv[i]);
                return false;
            }
        } else if (strcmp(arg, "-p") == 0 && has_value) {
            ++i;
            if (opt->mode == MODE_GREEDY) {
                opt->prompt_text = argv[i];
            } else if (!parse_positive_int(argv[i], &opt->prompt_tokens)) {
                fprintf(stderr, "peer_bench: bad prompt token count for -p '%s'\n", argv[i]);
                return false;
            }
        } else {
            fprintf(stderr, "peer_bench: unknown or incomplete option '%s'\n", arg);
            usage();
            return false;
        }
    }
    if (opt->model_path == NULL) {
        fprintf(stderr, "peer_bench: -m MODEL is required\n");
        return false;
    }
    if (opt->mode == MODE_GREEDY && opt->prompt_text == NULL) {
        fprintf(stderr, "peer_bench: greedy mode needs -p \"prompt text\"\n");
        return false;
    }
    return true;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void quiet_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static void verbose_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    fputs(text, stderr);
}

// Ties go to the lowest id, as llama.cpp's greedy sampler does.
static llama_token argmax_token(const float * logits, int32_t n_vocab) {
    llama_token best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

// Writes s as a JSON string literal (the model path may hold any byte).
// Gap between the best and the second-best logit: a small gap at the step where two
// engines diverge points at rounding differences rather than a bug.
static float top2_margin(const float * logits, int32_t n_vocab, llama_token best) {
    float second = -INFINITY;
    for (int32_t i = 0; i < n_vocab; ++i) {
        if (i != best && logits[i] > second) {
            second = logits[i];
        }
    }
    return logits[best] - second;
}

static void print_json_string(const char * s) {
    putchar('"');
    for (const unsigned char * p = (const unsigned char *) s; *p; ++p) {
        if (*p == '"' || *p == '\\') {
            printf("\\%c", *p);
        } else if (*p < 0x20) {
            printf("\\u%04x", *p);
        } else {
            putchar(*p);
        }
    }
    putchar('"');
}

struct peer_session {
    struct llama_model * model;
    struct llama_context * ctx;
    const struct llama_vocab * vocab;
    int32_t n_vocab;
    double load_s;
};

static bool open_session(const struct peer_options * opt, uint32_t n_ctx, uint32_t n_batch,
                         struct peer_session * s) {
    struct llama_model_params mparams = llama_model_default_params();
    mparams.use_extra_bufts = opt->repack;
    mparams.load_mode = opt->mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;

    const double t0 = now_seconds();
    s->model = llama_model_load_from_file(opt->model_path, mparams);
    if (s->model == NULL) {
        fprintf(stderr, "peer_bench: llama.cpp could not load model '%s'\n", opt->model_path);
        return false;
    }

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = n_ctx;
    // The whole prompt goes through as one batch so prefill speed is llama.cpp's best case.
    cparams.n_batch = n_batch;
    cparams.n_ubatch = n_batch;
    cparams.n_seq_max = 1;
    cparams.n_threads = opt->threads;
    cparams.n_threads_batch = opt->threads;
    cparams.no_perf = true;
    s->ctx = llama_init_from_model(s->model, cparams);
    if (s->ctx == NULL) {
        fprintf(stderr, "peer_bench: llama.cpp could not create a context (n_ctx=%u)\n", n_ctx);
        llama_model_free(s->model);
        return false;
    }
    s->load_s = now_seconds() - t0;
    s->vocab = llama_model_get_vocab(s->model);
    s->n_vocab = llama_vocab_n_tokens(s->vocab);
    return true;
}

static void close_session(struct peer_session * s) {
    llama_free(s->ctx);
    llama_model_free(s->model);
}

static bool decode_tokens(struct peer_session * s, llama_token * tokens, int32_t n) {
    const int32_t rc = llama_decode(s->ctx, llama_batch_get_one(tokens, n));
    if (rc != 0) {
        fprintf(stderr, "peer_bench: llama_decode of %d tokens failed with code %d\n", n, rc);
        return false;
    }
    return true;
}

// Random-weight models make every id equally meaningful, so a fixed spread over the
// vocabulary is as good a prompt as any text. The sequence is the one `ember bench` uses
// (tools/cmd_bench.cpp): BOS, then ids past the control and byte tokens of SentencePiece
// vocabularies.
static void fill_synthetic_prompt(llama_token * ids, int32_t n, int32_t n_vocab, llama_token bos) {
    const int32_t base = n_vocab > 1000 ? 300 : 0;
    int32_t i = 0;
    if (bos >= 0 && n > 0) {
        ids[i++] = bos;
    }
    for (; i < n; ++i) {
        ids[i] = base + (llama_token) (((int64_t) i * 37) % (n_vocab - base));
    }
}

static int32_t tokenize_prompt(const struct peer_session * s, const char * text, llama_token ** out);

// The first n tokens of a text file, tokenized as `ember bench --prompt-file` does (BOS first when
// the model adds one, no special-token parsing), into ids. A shorter text is an error: the prompt
// length is part of what is measured.
static bool fill_text_prompt(const struct peer_session * s, const char * path, llama_token * ids, int32_t n) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "peer_bench: cannot read the prompt file '%s'\n", path);
        return false;
    }
    size_t cap = 1 << 16, len = 0;
    char * text = malloc(cap + 1);
    while (text != NULL) {
        len += fread(text + len, 1, cap - len, f);
        if (len < cap) {
            break;
        }
        char * bigger = realloc(text, 2 * cap + 1);
        if (bigger == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = bigger;
        cap *= 2;
    }
    const bool read_error = ferror(f) != 0;
    fclose(f);
    if (text == NULL || read_error) {
        fprintf(stderr, "peer_bench: could not read the prompt file '%s'\n", path);
        free(text);
        return false;
    }
    text[len] = '\0';
    llama_token * all = NULL;
    const int32_t got = tokenize_prompt(s, text, &all);
    free(text);
    if (got < n) {
        fprintf(stderr, "peer_bench: the prompt file '%s' has %d tokens, fewer than -p %d\n", path, got, n);
        free(all);
        return false;
    }
    memcpy(ids, all, sizeof(llama_token) * (size_t) n);
    free(all);
    return true;
}

// One prefill of the whole prompt as a single batch, then gen_tokens greedy decode steps of
// one token each. Decode time includes picking the next token, as in `ember bench`.
static bool timed_run(struct peer_session * s, const struct peer_options * opt,
                      llama_token * prompt, double * prefill_tps, double * decode_tps) {
    llama_memory_clear(llama_get_memory(s->ctx), true);
    double t0 = now_seconds();
    if (!decode_tokens(s, prompt, opt->prompt_tokens)) {
        return false;
    }
    const double prefill_s = now_seconds() - t0;

    t0 = now_seconds();
    for (int32_t i = 0; i < opt->gen_tokens; ++i) {
        llama_token next = argmax_token(llama_get_logits_ith(s->ctx, -1), s->n_vocab);
        if (!decode_tokens(s, &next, 1)) {
            return false;
        }
    }
    const double decode_s = now_seconds() - t0;
    *prefill_tps = opt->prompt_tokens / prefill_s;
    *decode_tps = opt->gen_tokens / decode_s;
    return true;
}

static int compare_doubles(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double median_of(const double * values, int n) {
    double sorted[MAX_RUNS];
    memcpy(sorted, values, sizeof(double) * (size_t) n);
    qsort(sorted, (size_t) n, sizeof(double), compare_doubles);
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static void print_json_array(const double * values, int n) {
    putchar('[');
    for (int i = 0; i < n; ++i) {
        printf(i ? ",%.3f" : "%.3f", values[i]);
    }
    putchar(']');
}

static int run_bench(const struct peer_options * opt) {
    struct peer_session s;
    const uint32_t n_ctx = (uint32_t) (opt->prompt_tokens + opt->gen_tokens + 1);
    if (!open_session(opt, n_ctx, (uint32_t) opt->prompt_tokens, &s)) {
        return 1;
    }
    int status = 1;
    double prefill[MAX_RUNS], decode[MAX_RUNS];
    llama_token * prompt = malloc(sizeof(llama_token) * (size_t) opt->prompt_tokens);
    if (prompt == NULL) {
        fprintf(stderr, "peer_bench: out of memory for the prompt\n");
        goto done;
    }
    if (opt->prompt_file == NULL) {
        fill_synthetic_prompt(prompt, opt->prompt_tokens, s.n_vocab, llama_vocab_bos(s.vocab));
    } else if (!fill_text_prompt(&s, opt->prompt_file, prompt, opt->prompt_tokens)) {
        goto done;
    }

    // Warm-up: a full-size prefill and one decode step touch the weights, the KV cache and
    // the compute buffers of both graph shapes, so the timed runs pay no first-use costs.
    if (!decode_tokens(&s, prompt, opt->prompt_tokens)) {
        goto done;
    }
    llama_token first = argmax_token(llama_get_logits_ith(s.ctx, -1), s.n_vocab);
    if (!decode_tokens(&s, &first, 1)) {
        goto done;
    }

    for (int run = 0; run < opt->runs; ++run) {
        if (!timed_run(&s, opt, prompt, &prefill[run], &decode[run])) {
            goto done;
        }
    }

    printf("{\"engine\":\"llama.cpp\",\"model\":");
    print_json_string(opt->model_path);
    printf(",\"prompt\":");
    print_json_string(opt->prompt_file != NULL ? opt->prompt_file : "synthetic");
    printf(",\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,\"runs\":%d"
           ",\"prefill_tokens_per_s\":%.3f,\"decode_tokens_per_s\":%.3f,\"prefill_runs\":",
           opt->threads, opt->prompt_tokens, opt->gen_tokens, opt->runs,
           median_of(prefill, opt->runs), median_of(decode, opt->runs));
    print_json_array(prefill, opt->runs);
    printf(",\"decode_runs\":");
    print_json_array(decode, opt->runs);
    printf(",\"load_s\":%.3f,\"repack\":%s,\"mmap\":%s,\"system_info\":", s.load_s,
           opt->repack ? "true" : "false", opt->mmap ? "true" : "false");
    print_json_string(llama_print_system_info());
    printf("}\n");
    status = 0;
done:
    free(prompt);
    close_session(&s);
    return status;
}

// Tokenizes like refgen.mjs: no special-token parsing, BOS prepended when the model asks for it.
static int32_t tokenize_prompt(const struct peer_session * s, const char * text,
                               llama_token ** out) {
    const int32_t len = (int32_t) strlen(text);
    const bool add_bos = llama_vocab_get_add_bos(s->vocab) && llama_vocab_bos(s->vocab) >= 0;
    int32_t cap = len + 2;
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) cap);
    if (tokens == NULL) {
        return -1;
    }
    int32_t offset = 0;
    if (add_bos) {
        tokens[offset++] = llama_vocab_bos(s->vocab);
    }
    int32_t n = llama_tokenize(s->vocab, text, len, tokens + offset, cap - offset, false, false);
    if (n < 0 && n != INT32_MIN) {
        cap = offset - n;
        llama_token * bigger = realloc(tokens, sizeof(llama_token) * (size_t) cap);
        if (bigger == NULL) {
            free(tokens);
            return -1;
        }
        tokens = bigger;
        n = llama_tokenize(s->vocab, text, len, tokens + offset, cap - offset, false, false);
    }
    if (n < 0) {
        free(tokens);
        return -1;
    }
    *out = tokens;
    return offset + n;
}

static int run_greedy(const struct peer_options * opt) {
    struct peer_session s;
    // A prompt never yields more tokens than it has bytes (plus BOS), so this bounds the context.
    const uint32_t n_ctx = (uint32_t) (strlen(opt->prompt_text) + 2 + (size_t) opt->gen_tokens);
    const uint32_t n_batch = n_ctx < 512 ? 512 : n_ctx;
    if (!open_session(opt, n_batch, n_batch, &s)) {
        return 1;
    }
    int status = 1;
    llama_token * prompt = NULL;
    llama_token * generated = malloc(sizeof(llama_token) * (size_t) opt->gen_tokens);
    float * margins = malloc(sizeof(float) * (size_t) opt->gen_tokens);
    const int32_t n_prompt = tokenize_prompt(&s, opt->prompt_text, &prompt);
    if (n_prompt <= 0 || generated == NULL || margins == NULL) {
        fprintf(stderr, "peer_bench: could not tokenize the prompt\n");
        goto done;
    }
    if (!decode_tokens(&s, prompt, n_prompt)) {
        goto done;
    }
    int32_t n_generated = 0;
    while (n_generated < opt->gen_tokens) {
        const float * logits = llama_get_logits_ith(s.ctx, -1);
        llama_token next = argmax_token(logits, s.n_vocab);
        margins[n_generated] = top2_margin(logits, s.n_vocab, next);
        generated[n_generated++] = next;
        // refgen.mjs stops after emitting an end-of-generation token; so do we.
        if (llama_vocab_is_eog(s.vocab, next) || n_generated == opt->gen_tokens) {
            break;
        }
        if (!decode_tokens(&s, &next, 1)) {
            goto done;
        }
    }

    printf("{\"prompt_tokens\":[");
    for (int32_t i = 0; i < n_prompt; ++i) {
        printf(i ? ",%d" : "%d", prompt[i]);
    }
    printf("],\"greedy_tokens\":[");
    for (int32_t i = 0; i < n_generated; ++i) {
        printf(i ? ",%d" : "%d", generated[i]);
    }
    const bool ended_at_eog = n_generated > 0 && llama_vocab_is_eog(s.vocab, generated[n_generated - 1]);
    printf("],\"top2_margins\":[");
    for (int32_t i = 0; i < n_generated; ++i) {
        printf(i ? ",%.4g" : "%.4g", margins[i]);
    }
    printf("],\"ended_at_eog\":%s}\n", ended_at_eog ? "true" : "false");
    status = 0;
done:
    free(prompt);
    free(generated);
    free(margins);
    close_session(&s);
    return status;
}

int main(int argc, char ** argv) {
    struct peer_options opt;
    if (!parse_options(argc, argv, &opt)) {
        return 2;
    }
    llama_log_set(opt.verbose ? verbose_log : quiet_log, NULL);

    // The npm build ships one CPU backend per x86 level; load_all picks the best for this CPU.
    const char * backend_dir = getenv("EMBER_LLAMACPP_LIBDIR");
    ggml_backend_load_all_from_path(backend_dir != NULL ? backend_dir : PEER_BACKEND_DIR);
    llama_backend_init();

    const int status = opt.mode == MODE_BENCH ? run_bench(&opt) : run_greedy(&opt);
    llama_backend_free();
    return status;
}
