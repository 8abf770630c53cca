// The one place where absl statuses become gRPC statuses (and back, for clients).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace quiver::worker {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace quiver::worker
