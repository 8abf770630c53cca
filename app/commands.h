// Subcommands of the quiver binary. Each returns the process exit code.
#pragma once

#include <string>

#include "scheduler/limits.h"

namespace quiver::app {

struct ServeOptions {
  std::string model_dir = "models/all-MiniLM-L6-v2";
  std::string host = "0.0.0.0";
  int port = 8080;
  scheduler::SchedulerLimits limits;
};

struct TokenizeOptions {
  std::string tokenizer_path;
  bool pairs = false;
  int max_length = 0;  // 0: no truncation
  std::string truncation_side = "right";
};

int RunServe(const ServeOptions& options);
int RunTokenize(const TokenizeOptions& options);
int RunVersion();

}  // namespace quiver::app
