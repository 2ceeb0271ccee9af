// probe_peer on a connected Unix socket pair: a quiet peer answers at once (the peek must never
// wait: a blocking one would hold an I/O thread and a finished answer until the client gave up), bytes
// sent are seen and left in the socket, a closed peer is gone.
#include "server/peer_probe.h"

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>

namespace net = boost::asio;
using ember::server::PeerActivity;
using ember::server::probe_peer;

TEST_CASE("probe_peer: quiet, sent (left unread), gone, without ever blocking") {
  net::io_context ioc;
  net::local::stream_protocol::socket ours(ioc), theirs(ioc);
  net::local::connect_pair(ours, theirs);

  const auto t0 = std::chrono::steady_clock::now();
  CHECK(probe_peer(ours) == PeerActivity::Quiet);
  CHECK(probe_peer(ours) == PeerActivity::Quiet);  // asking twice changes nothing
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));

  net::write(theirs, net::buffer("GET", 3));
  CHECK(probe_peer(ours) == PeerActivity::Sent);
  CHECK(probe_peer(ours) == PeerActivity::Sent);  // peeked, not consumed
  char got[3] = {};
  net::read(ours, net::buffer(got, 3));
  CHECK(std::string(got, 3) == "GET");
  CHECK(probe_peer(ours) == PeerActivity::Quiet);

  theirs.close();
  CHECK(probe_peer(ours) == PeerActivity::Gone);
}
