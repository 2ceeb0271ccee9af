#pragma once
// POST /tokenize and /detokenize (server/tokenize_api.h): the tokenizer is immutable and
// thread-safe, so these need no engine job, only a worker thread (a megabyte of text must not
// stall the I/O thread).
#include "server/http_message.h"
#include "server/responder.h"

namespace ember::server {

// `detokenize`: /detokenize, else /tokenize. ctx.models must be set (the router answers 503 while
// the startup model loads); the body's `model` picks the vocabulary (default: the default model).
void handle_tokens(const Request& req, bool detokenize, RouteContext& ctx, Responder& out);

}  // namespace ember::server
