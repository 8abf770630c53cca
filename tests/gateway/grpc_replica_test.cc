// GrpcReplica against a worker that stopped answering: a TCP listener that never accepts (the
// kernel completes the handshake, nothing speaks HTTP/2), so a health check waits for its deadline.
#include "gateway/grpc_replica.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace quiver::gateway {
namespace {

class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The last reference to a replica may go on a gRPC callback thread (a request's run state holds
// the replicas it was sent to) once DNS no longer names it: its destructor must not wait out a
// health check to a worker that went silent. Each check here is given 60 s, and gRPC gives up on
// a connection that never answers after about 20 s: the destructor waited that long (19.7 s)
// before it cancelled the check; now it returns at once.
TEST(GrpcReplicaTest, GoingAwayCancelsTheHealthCheckInFlight) {
  SilentListener silent;
  MetricsRegistry metrics;
  auto replica = std::make_unique<GrpcReplica>(silent.address(), std::chrono::milliseconds(1000),
                                               &metrics, std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the first check is out
  EXPECT_FALSE(replica->healthy());
  const auto start = std::chrono::steady_clock::now();
  replica.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace quiver::gateway
