// The API's description of the model (gateway::api::ModelDescription) from what a worker says of
// it (ModelInfo): the gateway's from its workers, quiver serve's from its own engine described
// the same way (worker/model_info.h), so that the two cannot drift. The folder's prompts and
// labels, and the server's settings, are added by the caller.
#pragma once

#include "gateway/api/service.h"
#include "quiver/v1/inference.pb.h"

namespace quiver::app {

gateway::api::ModelDescription DescribeModel(const quiver::v1::ModelInfoResponse& info);

}  // namespace quiver::app
