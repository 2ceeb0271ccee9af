#pragma once
// The write side of one streamed (SSE) response as an explicit state machine, free of sockets so
// every transition is unit-tested. The connection asks it what to write next and reports each
// completed write; events produced while a write is in flight wait in an outbox and go out
// together in the next write, so there is never more than one write in flight.
//
//   Idle -> HeadersPending   begin(): the header write is in flight
//   HeadersPending -> Streaming   its write completed: events go out as they come
//   HeadersPending/Streaming -> Finishing   finish(): the last events are queued (the engine may
//                                finish before the header is even out)
//   Finishing -> Done        the write carrying the end of the body completed
//   any -> Aborted           abort(): the client is gone or was cut off; nothing more is written
//   Done -> Idle             reset(): the connection reads its next request
#include <cstddef>
#include <string>

namespace ember::server {

class SseStream {
 public:
  enum class State { Idle, HeadersPending, Streaming, Finishing, Done, Aborted };

  State state() const { return state_; }
  // Starts a stream whose header the caller writes now. `chunked`: HTTP/1.1 chunked coding, each
  // write one chunk and the body ended by the last chunk; otherwise (HTTP/1.0) raw bytes, the
  // body ended by closing the connection.
  void begin(bool chunked);
  // Whether the generation's events are still wanted (nothing has ended the stream yet).
  bool accepting() const { return state_ == State::HeadersPending || state_ == State::Streaming; }
  // Queues events; ignored unless accepting().
  void push(const std::string& events);
  // Queues the last events and ends the stream after them; ignored unless accepting().
  void finish(const std::string& events);
  void abort() { state_ = State::Aborted; }

  // The bytes to write next (they stay alive until write_done()), or null when a write is in
  // flight or nothing is due. With nothing left to write after finish(), the stream is Done.
  const std::string* next_write();
  // The write in flight (the header's or one from next_write()) completed.
  void write_done();
  bool write_in_flight() const { return in_flight_ != Write::None; }

  // Streaming with nothing queued or in flight: the moment for a keep-alive comment.
  bool quiet() const { return state_ == State::Streaming && !write_in_flight() && outbox_.empty(); }
  // Bytes produced for the client and not yet taken by its socket.
  size_t backlog() const { return outbox_.size() + wire_.size(); }

  void reset();

 private:
  enum class Write { None, Header, Events, Last };  // what the write in flight carries

  State state_ = State::Idle;
  Write in_flight_ = Write::None;
  bool chunked_ = true;
  std::string outbox_;  // events waiting for the next write
  std::string wire_;    // the bytes being written
};

const char* to_string(SseStream::State state);

// An SSE comment: sent while nothing else is, so proxies and clients do not time the stream out.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

}  // namespace ember::server
