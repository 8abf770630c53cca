// What Api's route files (api.cc, embed_routes.cc, score_routes.cc, token_routes.cc) share: one
// request in progress (Api::Call) and the JSON answer. Internal to gateway/api.
#pragma once

#include <string>
#include <utility>

#include "gateway/api/api.h"

namespace quiver::gateway::api {

struct Api::Call {
  Dialect dialect = Dialect::kTei;
  CallContext context;  // the deadline, and whether the client is still connected
};

// A JSON answer with `status`.
inline HttpResponse Json(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace quiver::gateway::api
