#pragma once
// What a connection's peer did while no read was pending: closed it, sent more (a pipelined
// request), or nothing. Asks without blocking: the plain-response path calls it when a wait_read
// on the socket completes, and such a wake-up can be stale (an epoll edge for bytes the request's
// own read already took). A blocking peek would then hold the I/O thread, and the connection's
// strand with its finished answer, until the client gave up.
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/system/error_code.hpp>

namespace ember::server {

enum class PeerActivity {
  Quiet,    // nothing to read and still connected: keep watching
  Sent,     // bytes wait in the socket (left there for the next read)
  Gone,     // end of stream or a socket error
};

template <class Socket>
PeerActivity probe_peer(Socket& socket) {
  boost::system::error_code ec;
  socket.non_blocking(true, ec);  // async operations are unaffected; this peek must not wait
  if (ec) return PeerActivity::Gone;
  char byte = 0;
  const size_t n = socket.receive(boost::asio::buffer(&byte, 1), boost::asio::socket_base::message_peek, ec);
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again ||
      ec == boost::asio::error::interrupted) {
    return PeerActivity::Quiet;
  }
  return !ec && n > 0 ? PeerActivity::Sent : PeerActivity::Gone;
}

}  // namespace ember::server
