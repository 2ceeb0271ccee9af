#include "server/sse_stream.h"

#include <cstdio>

namespace ember::server {
namespace {

// One chunk of the chunked transfer coding: the size in hex, the data, CRLF after each.
void append_chunk(std::string& out, const std::string& data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out += size;
  out += data;
  out += "\r\n";
}

constexpr const char* kLastChunk = "0\r\n\r\n";

}  // namespace

void SseStream::begin(bool chunked) {
  chunked_ = chunked;
  outbox_.clear();
  wire_.clear();
  state_ = State::HeadersPending;
  in_flight_ = Write::Header;
}

void SseStream::push(const std::string& events) {
  if (accepting()) outbox_ += events;
}

void SseStream::finish(const std::string& events) {
  if (!accepting()) return;
  outbox_ += events;
  state_ = State::Finishing;
}

const std::string* SseStream::next_write() {
  if (write_in_flight()) return nullptr;
  if (state_ != State::Streaming && state_ != State::Finishing) return nullptr;
  wire_.clear();
  if (!outbox_.empty()) {
    if (chunked_) {
      append_chunk(wire_, outbox_);
    } else {
      wire_.swap(outbox_);
    }
    outbox_.clear();
  }
  if (state_ == State::Streaming) {
    if (wire_.empty()) return nullptr;
    in_flight_ = Write::Events;
    return &wire_;
  }
  // Finishing: everything left goes out in one write, with the last chunk when chunked.
  if (chunked_) wire_ += kLastChunk;
  if (wire_.empty()) {  // HTTP/1.0 with nothing left: closing the connection ends the body
    state_ = State::Done;
    return nullptr;
  }
  in_flight_ = Write::Last;
  return &wire_;
}

void SseStream::write_done() {
  const Write done = in_flight_;
  in_flight_ = Write::None;
  wire_.clear();
  if (state_ == State::Aborted) return;
  if (done == Write::Header && state_ == State::HeadersPending) state_ = State::Streaming;
  if (done == Write::Last) state_ = State::Done;
}

void SseStream::reset() {
  state_ = State::Idle;
  in_flight_ = Write::None;
  outbox_.clear();
  wire_.clear();
}

const char* to_string(SseStream::State state) {
  switch (state) {
    case SseStream::State::Idle: return "Idle";
    case SseStream::State::HeadersPending: return "HeadersPending";
    case SseStream::State::Streaming: return "Streaming";
    case SseStream::State::Finishing: return "Finishing";
    case SseStream::State::Done: return "Done";
    case SseStream::State::Aborted: return "Aborted";
  }
  return "?";
}

}  // namespace ember::server
