// `quiver serve`: loads and checks the model folder, logs the configuration, and runs until
// SIGTERM or SIGINT, then exits 0. The HTTP gateway and the in-process replica plug in here.
#include <pthread.h>
#include <signal.h>

#include <cstring>

#include "app/commands.h"
#include "common/strings.h"
#include "engine/model_folder.h"
#include "scheduler/limits.h"
#include "spdlog/spdlog.h"

namespace quiver::app {

int RunServe(const ServeOptions& options) {
  // Block the stop signals in every thread before any is started; this thread takes them with
  // sigwait, so no handler runs at an arbitrary point.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (absl::Status status = scheduler::ValidateLimits(options.limits); !status.ok()) {
    spdlog::error("{}", status.message());
    return 2;
  }
  absl::StatusOr<engine::ModelFolder> folder = engine::LoadModelFolder(options.model_dir);
  if (!folder.ok()) {
    spdlog::error("cannot load model: {}", folder.status().message());
    return 1;
  }
  const engine::ModelConfig& config = folder->config;
  spdlog::info(
      "quiver serve: model={} architecture={} hidden={} max_input_tokens={} max_seq_length={} "
      "pooling={} normalize={} weights={} tensors ({:.1f} MB) host={} port={} "
      "max_batch_tokens={} max_batch_seqs={} max_queued_tokens={}",
      folder->dir, config.architecture_name, config.hidden(), config.max_input_tokens(),
      folder->pooling.max_seq_length.value_or(config.max_input_tokens()),
      engine::PoolingModeName(folder->pooling.mode), folder->pooling.normalize,
      folder->resolved.size(), folder->weights.weights_bytes() / 1e6, options.host, options.port,
      options.limits.max_batch_tokens, options.limits.max_batch_seqs,
      options.limits.max_queued_tokens);
  spdlog::warn("quiver serve: the HTTP APIs are not built yet; the model is loaded and checked, "
               "waiting for SIGTERM");

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("quiver serve: {} received, stopping", strsignal(signal_number));
  return 0;
}

}  // namespace quiver::app
