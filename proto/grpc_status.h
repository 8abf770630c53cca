// The one place where absl statuses become gRPC statuses (the worker's answers) and back (the
// gateway's replicas reading them).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace quiver {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace quiver
