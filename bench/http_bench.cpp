// ember-http-bench: load generator for `ember serve`. For each client count N it starts N
// concurrent streaming /v1/completions requests, R times, and measures per request the time to
// the first content event (TTFT), the generated tokens and the client-side decode rate, plus the
// aggregate tokens/s of the round. It prints a Markdown table of medians over the R rounds and
// can write every request as a JSON line (--json-out) for scripts (bench/http_bench.sh).
//
// Plain threads and synchronous Beast on purpose: one blocking connection per client is the
// simplest client whose timing is easy to trust. A watchdog shuts sockets down when a round runs
// past --timeout, so a stuck server cannot hang the benchmark.
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Where the server listens: "host:port", "http://host:port[/]" or "unix:/path/to/socket".
struct Target {
  bool unix_socket = false;
  std::string host;  // TCP host, or the socket path
  std::string port;
  std::string host_header() const { return unix_socket ? "localhost" : host + ":" + port; }
  std::string describe() const { return unix_socket ? "unix:" + host : host + ":" + port; }
};

Target parse_target(std::string url) {
  Target t;
  if (url.rfind("unix:", 0) == 0) {
    t.unix_socket = true;
    t.host = url.substr(5);
    if (t.host.empty()) throw std::runtime_error("--url unix: needs a socket path");
    return t;
  }
  if (url.rfind("http://", 0) == 0) url = url.substr(7);
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.find('/') != std::string::npos) throw std::runtime_error("--url takes host:port, not a path: '" + url + "'");
  const size_t colon = url.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == url.size()) {
    throw std::runtime_error("--url must be host:port, http://host:port or unix:/path, got '" + url + "'");
  }
  t.host = url.substr(0, colon);
  t.port = url.substr(colon + 1);
  if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') t.host = t.host.substr(1, t.host.size() - 2);
  return t;
}

// Server-sent events, as the HTML spec describes them: lines end in \n, \r\n or \r; an empty
// line dispatches the event; lines starting with ':' are comments (the server's keep-alives);
// "data:" lines accumulate with one optional leading space removed. Other fields are ignored.
class SseParser {
 public:
  // on_data(payload) is called once per dispatched event that carried data.
  template <class OnData>
  void feed(const char* p, size_t n, OnData&& on_data) {
    for (size_t i = 0; i < n; ++i) {
      const char c = p[i];
      if (c == '\n' && last_was_cr_) {  // the \n of a \r\n pair: the line already ended
        last_was_cr_ = false;
        continue;
      }
      last_was_cr_ = (c == '\r');
      if (c != '\n' && c != '\r') {
        if (line_.size() >= kMaxLine) throw std::runtime_error("SSE line longer than 1 MiB");
        line_.push_back(c);
        continue;
      }
      end_line(on_data);
    }
  }

 private:
  static constexpr size_t kMaxLine = size_t{1} << 20;

  template <class OnData>
  void end_line(OnData& on_data) {
    if (line_.empty()) {
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
      return;
    }
    if (line_.front() != ':') {
      const size_t colon = line_.find(':');
      const std::string field = line_.substr(0, colon);
      std::string value = colon == std::string::npos ? std::string() : line_.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.erase(0, 1);
      if (field == "data") {
        if (has_data_) data_ += '\n';
        data_ += value;
        has_data_ = true;
      }
    }
    line_.clear();
  }

  std::string line_, data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

struct RequestResult {
  bool ok = false;
  std::string error;
  int status = 0;
  Clock::time_point start, first_content, last_content, end;
  int64_t content_events = 0;  // events with non-empty text
  int64_t usage_tokens = -1;   // usage.completion_tokens when the server sends a usage chunk
  std::string finish_reason;
  bool saw_done = false;

  int64_t tokens() const { return usage_tokens >= 0 ? usage_tokens : content_events; }
  double ttft_ms() const { return std::chrono::duration<double, std::milli>(first_content - start).count(); }
  double total_ms() const { return std::chrono::duration<double, std::milli>(end - start).count(); }
  // Client-side decode time per token: the gap between the first and the last content event
  // spans (tokens - 1) single-token steps, the same quantity `ember run` reports as decode.
  std::optional<double> decode_ms_per_token() const {
    if (content_events < 2 || tokens() < 2) return std::nullopt;
    return std::chrono::duration<double, std::milli>(last_content - first_content).count() /
           static_cast<double>(tokens() - 1);
  }
};

// Sockets of one round, so the watchdog can shut down the ones still open past the deadline.
// shutdown(2) on a descriptor is safe while another thread blocks on it, and it wakes that thread.
class SocketRegistry {
 public:
  explicit SocketRegistry(size_t n) : fds_(n, -1) {}
  void set(size_t i, int fd) {
    std::lock_guard lock(mu_);
    fds_[i] = fd;
  }
  void shutdown_all() {
    std::lock_guard lock(mu_);
    for (int fd : fds_) {
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    }
  }

 private:
  std::mutex mu_;
  std::vector<int> fds_;
};

// Keeps a socket registered for the watchdog while it is open; declared after the socket, so it is
// destroyed (unregistered) before the socket closes its descriptor, whatever path leaves the scope.
class Registration {
 public:
  Registration(SocketRegistry& registry, size_t slot, int fd) : registry_(registry), slot_(slot) { registry_.set(slot_, fd); }
  ~Registration() { registry_.set(slot_, -1); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  SocketRegistry& registry_;
  size_t slot_;
};

// Interprets one SSE data payload of a completions stream.
void on_event(const std::string& data, RequestResult& r, Clock::time_point now) {
  if (data == "[DONE]") {
    r.saw_done = true;
    return;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error("SSE event is not a JSON object: " + data.substr(0, 200));
  if (j.contains("error")) {
    const json& e = j["error"];
    throw std::runtime_error("error event: " + (e.is_object() && e.contains("message") ? e["message"].dump() : e.dump()));
  }
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens") &&
      j["usage"]["completion_tokens"].is_number_integer()) {
    r.usage_tokens = j["usage"]["completion_tokens"].get<int64_t>();
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  const json& c = j["choices"][0];
  if (!c.is_object()) return;
  if (c.contains("finish_reason") && c["finish_reason"].is_string()) r.finish_reason = c["finish_reason"];
  std::string text;  // completions carry "text"; chat chunks would carry delta.content
  if (c.contains("text") && c["text"].is_string()) {
    text = c["text"];
  } else if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
             c["delta"]["content"].is_string()) {
    text = c["delta"]["content"];
  }
  if (text.empty()) return;
  if (r.content_events == 0) r.first_content = now;
  r.last_content = now;
  ++r.content_events;
}

template <class Stream>
void exchange(Stream& stream, const Target& target, const std::string& api_key, const std::string& body,
              RequestResult& r) {
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, target.host_header());
  req.set(http::field::user_agent, "ember-http-bench");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  req.keep_alive(false);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::uint64_t{256} << 20);
  http::read_header(stream, buffer, parser);
  r.status = parser.get().result_int();
  const bool ok_status = r.status == 200;
  std::string error_body;
  SseParser sse;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    beast::error_code ec;
    // read_some returns as soon as the parser made progress, so each event is timed when its
    // bytes arrive, not when a buffer fills.
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) throw beast::system_error(ec);
    const size_t n = sizeof chunk - parser.get().body().size;
    const auto now = Clock::now();
    if (!ok_status) {
      if (error_body.size() < 4096) error_body.append(chunk, n);
      continue;
    }
    sse.feed(chunk, n, [&](const std::string& data) { on_event(data, r, now); });
  }
  if (!ok_status) throw std::runtime_error("HTTP " + std::to_string(r.status) + ": " + error_body.substr(0, 300));
  if (!r.saw_done) throw std::runtime_error("stream ended without data: [DONE]");
  if (r.content_events == 0) throw std::runtime_error("stream carried no text");
}

RequestResult run_request(const Target& target, const std::string& api_key, const std::string& body,
                          SocketRegistry& sockets, size_t slot) {
  RequestResult r;
  r.start = Clock::now();
  try {
    net::io_context io;
    if (target.unix_socket) {
      net::local::stream_protocol::socket sock(io);
      sock.connect(net::local::stream_protocol::endpoint(target.host));
      Registration registered(sockets, slot, sock.native_handle());
      exchange(sock, target, api_key, body, r);
    } else {
      net::ip::tcp::resolver resolver(io);
      net::ip::tcp::socket sock(io);
      net::connect(sock, resolver.resolve(target.host, target.port));
      sock.set_option(net::ip::tcp::no_delay(true));
      Registration registered(sockets, slot, sock.native_handle());
      exchange(sock, target, api_key, body, r);
    }
    r.ok = true;
  } catch (const boost::system::system_error& e) {
    r.error = e.code().message();  // what() would add Beast's source location
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.end = Clock::now();
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  std::string url = "127.0.0.1:8080";
  std::vector<int> clients{1, 4, 16};
  std::string prompt = "Once upon a time";
  int64_t max_tokens = 64;
  int runs = 3;
  int warmup = 1;
  uint64_t seed = 1234;
  std::string model;
  std::string api_key;
  double timeout_s = 600;
  std::string json_out;
};

// Figures of one round (N concurrent requests).
struct Round {
  std::vector<RequestResult> requests;
  double wall_s = 0;
};

Round run_round(const Options& o, const Target& target, const std::string& body, int n_clients) {
  Round round;
  round.requests.resize(static_cast<size_t>(n_clients));
  SocketRegistry sockets(static_cast<size_t>(n_clients));
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::latch go(n_clients + 1);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n_clients));
  for (int i = 0; i < n_clients; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();  // all clients start together
      round.requests[static_cast<size_t>(i)] = run_request(target, o.api_key, body, sockets, static_cast<size_t>(i));
      std::lock_guard lock(mu);
      ++finished;
      cv.notify_all();
    });
  }
  const auto t0 = Clock::now();
  go.arrive_and_wait();
  bool timed_out = false;
  {
    std::unique_lock lock(mu);
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
    if (!cv.wait_until(lock, deadline, [&] { return finished == n_clients; })) {
      std::fprintf(stderr, "ember-http-bench: round with %d clients ran past --timeout %.0f s; closing its sockets\n",
                   n_clients, o.timeout_s);
      sockets.shutdown_all();
      timed_out = true;
    }
  }
  for (auto& t : threads) t.join();
  if (timed_out) {
    for (auto& r : round.requests) {
      if (!r.ok) r.error = "no complete response within --timeout (" + r.error + ")";
    }
  }
  Clock::time_point first = round.requests.front().start, last = round.requests.front().end;
  for (const auto& r : round.requests) {
    first = std::min(first, r.start);
    last = std::max(last, r.end);
  }
  round.wall_s = std::chrono::duration<double>(last - first).count();
  return round;
}

std::string request_body(const Options& o) {
  json body = {{"prompt", o.prompt},
               {"max_tokens", o.max_tokens},
               {"temperature", 0},
               {"seed", o.seed},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  return body.dump();
}

double cpu_ms_so_far() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return 1e3 * static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-3 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int bench(const Options& o) {
  const double cpu_at_start = cpu_ms_so_far();  // process start-up is not the client's per-token work
  const Target target = parse_target(o.url);
  const std::string body = request_body(o);
  std::ofstream jout;
  if (!o.json_out.empty()) {
    jout.open(o.json_out, std::ios::trunc);
    if (!jout) throw std::runtime_error("cannot write --json-out file '" + o.json_out + "'");
  }

  int64_t all_tokens = 0;  // every token this process received, warm-up included (CPU per token)
  // Untimed single requests first: page cache, CPU clocks, the server's first-request paths.
  for (int i = 0; i < o.warmup; ++i) {
    Round w = run_round(o, target, body, 1);
    const RequestResult& r = w.requests.front();
    if (!r.ok) throw std::runtime_error("warm-up request to " + target.describe() + " failed: " + r.error);
    all_tokens += r.tokens();
    if (r.tokens() < o.max_tokens) {
      std::fprintf(stderr, "ember-http-bench: note: the model stopped after %lld of %lld tokens (finish_reason '%s'); "
                   "figures are per generated token\n", (long long)r.tokens(), (long long)o.max_tokens,
                   r.finish_reason.c_str());
    }
  }

  std::printf("| clients | runs | TTFT median ms | TTFT max ms | tokens/request | client tok/s (median) | "
              "client decode ms/token | aggregate tok/s | failed requests |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  int total_failed = 0;
  for (int n : o.clients) {
    std::vector<double> ttft_med, ttft_max, tokens_med, client_tps, decode_ms, aggregate;
    int failed = 0;
    for (int run = 0; run < o.runs; ++run) {
      Round round = run_round(o, target, body, n);
      std::vector<double> ttft, toks, tps, dms;
      int64_t sum_tokens = 0;
      for (size_t i = 0; i < round.requests.size(); ++i) {
        const RequestResult& r = round.requests[i];
        json line = {{"clients", n}, {"run", run}, {"client", i}, {"ok", r.ok}, {"status", r.status},
                     {"total_ms", r.total_ms()}};
        if (!r.ok) {
          ++failed;
          line["error"] = r.error;
          std::fprintf(stderr, "ember-http-bench: %d clients, run %d, client %zu failed: %s\n", n, run, i, r.error.c_str());
        } else {
          const auto d = r.decode_ms_per_token();
          ttft.push_back(r.ttft_ms());
          toks.push_back(static_cast<double>(r.tokens()));
          sum_tokens += r.tokens();
          all_tokens += r.tokens();
          if (d) {
            dms.push_back(*d);
            tps.push_back(1000.0 / *d);
          }
          line.update({{"ttft_ms", r.ttft_ms()},
                       {"tokens", r.tokens()},
                       {"content_events", r.content_events},
                       {"usage_tokens", r.usage_tokens},
                       {"finish_reason", r.finish_reason},
                       {"decode_ms_per_token", d ? json(*d) : json(nullptr)}});
        }
        if (jout) jout << line.dump() << '\n';
      }
      if (!ttft.empty()) {
        ttft_med.push_back(median(ttft));
        ttft_max.push_back(*std::max_element(ttft.begin(), ttft.end()));
        tokens_med.push_back(median(toks));
      }
      if (!tps.empty()) client_tps.push_back(median(tps));
      if (!dms.empty()) decode_ms.push_back(median(dms));
      aggregate.push_back(round.wall_s > 0 ? static_cast<double>(sum_tokens) / round.wall_s : 0.0);
    }
    total_failed += failed;
    std::printf("| %d | %d | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f | %d |\n", n, o.runs, median(ttft_med),
                median(ttft_max), median(tokens_med), median(client_tps), median(decode_ms), median(aggregate), failed);
    std::fflush(stdout);
    if (jout) {
      jout << json{{"summary", true},
                   {"clients", n},
                   {"runs", o.runs},
                   {"max_tokens", o.max_tokens},
                   {"ttft_ms_median", median(ttft_med)},
                   {"ttft_ms_max_median", median(ttft_max)},
                   {"tokens_per_request_median", median(tokens_med)},
                   {"client_tokens_per_s_median", median(client_tps)},
                   {"decode_ms_per_token_median", median(decode_ms)},
                   {"decode_ms_per_token_runs", decode_ms},
                   {"aggregate_tokens_per_s_median", median(aggregate)},
                   {"aggregate_tokens_per_s_runs", aggregate},
                   {"failed_requests", failed}}
                  .dump()
           << '\n';
    }
  }
  if (jout) {
    // The client's own CPU time since start-up (threads, connect, HTTP, SSE and JSON parsing):
    // what a streaming client costs per token, independent of how busy the machine is.
    jout << json{{"client_process", true}, {"cpu_ms", cpu_ms_so_far() - cpu_at_start}, {"tokens", all_tokens}}.dump()
         << '\n';
  }
  return total_failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ember-http-bench: TTFT and tokens/s of concurrent streaming /v1/completions clients"};
  app.add_option("--url", o.url, "Server: host:port, http://host:port or unix:/path (default 127.0.0.1:8080)");
  app.add_option("--clients", o.clients, "Concurrent client counts, comma-separated (default 1,4,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--prompt", o.prompt, "Prompt text (default 'Once upon a time')");
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of each request (default 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--runs", o.runs, "Rounds per client count; the table shows medians (default 3)")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", o.warmup, "Untimed single requests before measuring (default 1)")->check(CLI::Range(0, 100));
  app.add_option("--seed", o.seed, "Sampling seed sent with every request (default 1234; temperature is 0)");
  app.add_option("--model", o.model, "Model id to send (default: none, the server's model)");
  app.add_option("--api-key", o.api_key, "Bearer key (default: the first key in $EMBER_API_KEY, else none)");
  app.add_option("--timeout", o.timeout_s, "Seconds one round may take before its sockets are closed (default 600)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--json-out", o.json_out, "Write every request and each summary as JSON lines to this file");
  try {
    app.parse(argc, argv);
    if (o.api_key.empty()) {
      // The daemon reads EMBER_API_KEY as a comma-separated list; any one of them will do.
      if (const char* k = std::getenv("EMBER_API_KEY")) o.api_key = std::string(k).substr(0, std::string(k).find(','));
    }
    return bench(o);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-http-bench: error: %s\n", e.what());
    return 2;
  }
}
