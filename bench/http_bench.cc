// A native client for batch-1 latency over HTTP against any OpenAI-compatible embeddings endpoint
// (quiver serve, llama-cpp-python's server), so that a latency measured through a server and one
// measured on the engine (quiver_engine_bench) are both timed in C++, and their difference is the
// serving cost alone. The Python client of bench/suites.py spends 0.25-0.35 ms of its own CPU per
// call (JSON in and out and HTTP parsing, with caches that each forward pass has emptied); that
// time is the client's, not the server's.
//
//   quiver_http_bench --url http://127.0.0.1:8080 --model all-MiniLM-L6-v2
//                     --inputs .cache/bench/inputs.json --stdin
//
// Like quiver_engine_bench --stdin it prints "ready", then answers each line of standard input
// with one JSON line, until the input ends:
//   latency <tokens> <count>   count calls of one text of that length each -> {"ms": [...]}
//   queries <count>            count calls of one of the inputs' short queries each (as
//                              quiver_engine_bench's command of that name) -> {"ms": [...]}
//
// Each call is what a client does: one keep-alive connection with Nagle off; the request built
// as JSON ({"model", "input": [text], "encoding_format": "float"}) and written by Beast; the
// answer read by Beast (Content-Length or chunked), its body parsed as JSON and checked to hold
// one embedding of numbers. A failed call is an error line, not a latency.
// clang-format off: <utility> before Asio, whose awaitable.hpp uses std::exchange
#include <utility>
// clang-format on

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/stdin_protocol.h"
#include "common/file.h"
#include "common/json.h"
#include "common/strings.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using quiver::JsonValue;
using quiver::StrCat;
using quiver::bench::MsList;

// One keep-alive HTTP/1.1 connection, on Beast (the HTTP library quiver serve uses): each call
// runs its write and read on a private io_context, with a 600 s deadline so that a server that
// stops answering ends the run with an error instead of a hang.
class Connection {
 public:
  Connection(std::string host, std::string port) : host_(std::move(host)), port_(std::move(port)) {}

  // POSTs `body` to `path`; the answer's status and body.
  absl::StatusOr<std::pair<int, std::string>> Post(const std::string& path, std::string body) {
    http::request<http::string_body> request{http::verb::post, path, 11};
    request.set(http::field::host, StrCat(host_, ":", port_));
    request.set(http::field::content_type, "application/json");
    request.body() = std::move(body);
    request.prepare_payload();
    beast::error_code ec;
    for (int attempt = 0; attempt < 2; ++attempt) {  // once more if an idle connection was closed
      if (!stream_.socket().is_open()) {
        tcp::resolver resolver(io_);
        const auto endpoints = resolver.resolve(host_, port_, ec);
        if (!ec) stream_.connect(endpoints, ec);
        if (ec) {
          stream_.close();
          return absl::UnavailableError(
              StrCat("cannot connect to ", host_, ":", port_, ": ", ec.message()));
        }
        stream_.socket().set_option(tcp::no_delay(true), ec);
        buffer_.clear();
      }
      http::response<http::string_body> response;
      ec = Run([&](auto done) { http::async_write(stream_, request, done); });
      if (!ec) ec = Run([&](auto done) { http::async_read(stream_, buffer_, response, done); });
      if (!ec) {
        if (!response.keep_alive()) stream_.close();
        return std::make_pair(static_cast<int>(response.result_int()), std::move(response.body()));
      }
      stream_.close();
    }
    return absl::UnavailableError(StrCat("no answer from ", host_, ":", port_, ": ", ec.message()));
  }

 private:
  // Starts op(handler) and runs it to completion within the deadline; its error.
  template <typename Op>
  beast::error_code Run(Op op) {
    beast::error_code result;
    stream_.expires_after(std::chrono::seconds(600));
    op([&result](beast::error_code ec, size_t) { result = ec; });
    io_.restart();
    io_.run();
    return result;
  }

  std::string host_, port_;
  asio::io_context io_;
  beast::tcp_stream stream_{io_};
  beast::flat_buffer buffer_;
};

// One embeddings call: the request, the answer, and its check.
absl::Status Embed(Connection& connection, const std::string& model, const std::string& text) {
  const std::string body = StrCat("{\"model\":\"", quiver::JsonEscape(model), "\",\"input\":[\"",
                                  quiver::JsonEscape(text), "\"],\"encoding_format\":\"float\"}");
  absl::StatusOr<std::pair<int, std::string>> answer = connection.Post("/v1/embeddings", body);
  if (!answer.ok()) return answer.status();
  if (answer->first != 200) {
    return absl::InternalError(StrCat("HTTP ", answer->first, ": ", answer->second.substr(0, 300)));
  }
  absl::StatusOr<JsonValue> json = JsonValue::Parse(answer->second);
  if (!json.ok())
    return absl::InternalError(StrCat("the answer is not JSON: ", json.status().message()));
  const JsonValue* data = json->Find("data");
  const JsonValue* row = data != nullptr && data->is_array() && data->items().size() == 1
                             ? data->items()[0].Find("embedding")
                             : nullptr;
  if (row == nullptr || !row->is_array() || row->items().empty()) {
    return absl::InternalError("the answer does not hold one embedding");
  }
  for (const JsonValue& v : row->items()) {
    if (!v.is_number()) return absl::InternalError("an embedding value is not a number");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, model, inputs_path = ".cache/bench/inputs.json";
  bool stdin_mode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--stdin") {
      stdin_mode = true;
    } else if (i + 1 < argc && f == "--url") {
      url = argv[++i];
    } else if (i + 1 < argc && f == "--model") {
      model = argv[++i];
    } else if (i + 1 < argc && f == "--inputs") {
      inputs_path = argv[++i];
    } else {
      std::fprintf(stderr, "unknown flag or missing value: %s\n", f.c_str());
      return 2;
    }
  }
  // http://host:port, no path: the client posts to /v1/embeddings.
  const std::string scheme = "http://";
  const std::string hostport = url.starts_with(scheme) ? url.substr(scheme.size()) : "";
  const size_t colon = hostport.rfind(':');
  if (!stdin_mode || model.empty() || colon == std::string::npos ||
      hostport.find('/') != std::string::npos) {
    std::fprintf(stderr,
                 "usage: quiver_http_bench --url http://HOST:PORT --model NAME "
                 "[--inputs FILE] --stdin\n");
    return 2;
  }
  absl::StatusOr<std::string> text = quiver::ReadFile(inputs_path);
  absl::StatusOr<JsonValue> inputs = text.ok() ? JsonValue::Parse(*text) : text.status();
  const JsonValue* sets = inputs.ok() ? inputs->Find("sets") : nullptr;
  if (sets == nullptr || !sets->is_object()) {
    std::fprintf(stderr, "cannot read %s (make it with bench/make_inputs.py)\n",
                 inputs_path.c_str());
    return 1;
  }
  std::map<int64_t, std::vector<std::string>> texts;  // per token length; -1: the queries
  for (const auto& [key, list] : sets->members()) {
    for (const JsonValue& t : list.items()) texts[std::stoll(key)].push_back(t.as_string());
  }
  if (const JsonValue* queries = inputs->Find("queries");
      queries != nullptr && queries->is_array()) {
    for (const JsonValue& t : queries->items()) texts[-1].push_back(t.as_string());
  }

  Connection connection(hostport.substr(0, colon), hostport.substr(colon + 1));
  std::map<int64_t, size_t> next;  // per length, the next text to use
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    int64_t tokens = 0, count = 0;
    words >> command;
    if (command == "queries") {
      tokens = -1;
      words >> count;
    } else {
      words >> tokens >> count;
    }
    const bool known = (command == "latency" && tokens > 0) || command == "queries";
    if (!known || texts.count(tokens) == 0 || count <= 0) {
      std::printf("{\"error\": \"cannot run '%s'\"}\n", quiver::JsonEscape(line).c_str());
      std::fflush(stdout);
      continue;
    }
    const std::vector<std::string>& set = texts[tokens];
    std::vector<double> ms;
    absl::Status failed;
    for (int64_t i = 0; i < count && failed.ok(); ++i) {
      const std::string& input = set[next[tokens]++ % set.size()];
      const Clock::time_point t = Clock::now();
      failed = Embed(connection, model, input);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
    if (failed.ok()) {
      std::printf("{\"ms\": %s}\n", MsList(ms).c_str());
    } else {
      std::printf("{\"error\": \"%s\"}\n",
                  quiver::JsonEscape(std::string(failed.message())).c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
