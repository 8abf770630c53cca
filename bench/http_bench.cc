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
//
// Each call is what a client does: one keep-alive connection with Nagle off; the request built
// as JSON ({"model", "input": [text], "encoding_format": "float"}) and sent in one write; the
// status line, headers and a Content-Length or chunked body read; the body parsed as JSON and
// checked to hold one embedding of numbers. A failed call is an error line, not a latency.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

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

using Clock = std::chrono::steady_clock;
using quiver::JsonValue;
using quiver::StrCat;
using quiver::bench::MsList;

// One keep-alive HTTP/1.1 connection.
class Connection {
 public:
  Connection(std::string host, std::string port) : host_(std::move(host)), port_(std::move(port)) {}
  ~Connection() { Close(); }

  // POSTs `body` to `path`; the answer's status and body.
  absl::StatusOr<std::pair<int, std::string>> Post(const std::string& path,
                                                   const std::string& body) {
    const std::string request = StrCat("POST ", path, " HTTP/1.1\r\nHost: ", host_, ":", port_,
                                       "\r\nContent-Type: application/json\r\nContent-Length: ",
                                       body.size(), "\r\n\r\n", body);
    for (int attempt = 0; attempt < 2; ++attempt) {  // once more if an idle connection was closed
      if (fd_ < 0) {
        if (absl::Status s = Connect(); !s.ok()) return s;
      }
      if (SendAll(request)) {
        absl::StatusOr<std::pair<int, std::string>> answer = ReadAnswer();
        if (answer.ok() || attempt == 1) return answer;
      }
      Close();
    }
    return absl::UnavailableError(StrCat("cannot send to ", host_, ":", port_));
  }

 private:
  absl::Status Connect() {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host_.c_str(), port_.c_str(), &hints, &found) != 0 || found == nullptr) {
      return absl::UnavailableError(StrCat("cannot resolve ", host_));
    }
    fd_ = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    const bool ok = fd_ >= 0 && connect(fd_, found->ai_addr, found->ai_addrlen) == 0;
    freeaddrinfo(found);
    if (!ok) {
      Close();
      return absl::UnavailableError(StrCat("cannot connect to ", host_, ":", port_));
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    timeval timeout{600, 0};  // a server that stops answering ends the run with an error
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    buffer_.clear();
    return absl::OkStatus();
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool SendAll(const std::string& data) {
    for (size_t sent = 0; sent < data.size();) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until buffer_ holds at least `size` bytes.
  bool Fill(size_t size) {
    char chunk[65536];
    while (buffer_.size() < size) {
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return true;
  }

  // The next CRLF-terminated line, without it.
  bool Line(std::string* line) {
    size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos) {
      if (!Fill(buffer_.size() + 1)) return false;
    }
    line->assign(buffer_, 0, end);
    buffer_.erase(0, end + 2);
    return true;
  }

  bool Take(size_t n, std::string* out) {
    if (!Fill(n)) return false;
    out->append(buffer_, 0, n);
    buffer_.erase(0, n);
    return true;
  }

  absl::StatusOr<std::pair<int, std::string>> ReadAnswer() {
    const auto lost = absl::UnavailableError("the server closed the connection mid-answer");
    std::string line;
    if (!Line(&line) || line.size() < 12 || !line.starts_with("HTTP/1.")) return lost;
    const int status = std::atoi(line.c_str() + 9);
    long long length = -1;
    bool chunked = false, close_after = false;
    while (true) {
      if (!Line(&line)) return lost;
      if (line.empty()) break;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == "content-length") length = std::atoll(value.c_str());
      if (name == "transfer-encoding") chunked = value.find("chunked") != std::string::npos;
      if (name == "connection") close_after = value.find("close") != std::string::npos;
    }
    std::string body;
    if (chunked) {
      while (true) {
        if (!Line(&line)) return lost;
        const size_t size = std::strtoul(line.c_str(), nullptr, 16);
        if (size == 0) break;
        if (!Take(size, &body) || !Line(&line)) return lost;
      }
      do {  // trailers, up to the empty line
        if (!Line(&line)) return lost;
      } while (!line.empty());
    } else if (length >= 0) {
      if (!Take(static_cast<size_t>(length), &body)) return lost;
    } else {
      return absl::UnimplementedError("an answer without Content-Length or chunked encoding");
    }
    if (close_after) Close();
    return std::make_pair(status, std::move(body));
  }

  std::string host_, port_;
  int fd_ = -1;
  std::string buffer_;  // read and not yet used
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
  if (!json.ok()) return absl::InternalError(StrCat("the answer is not JSON: ", json.status().message()));
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
  std::map<int64_t, std::vector<std::string>> texts;  // per token length
  for (const auto& [key, list] : sets->members()) {
    for (const JsonValue& t : list.items()) texts[std::stoll(key)].push_back(t.as_string());
  }

  Connection connection(hostport.substr(0, colon), hostport.substr(colon + 1));
  std::map<int64_t, size_t> next;  // per length, the next text to use
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    int64_t tokens = 0, count = 0;
    words >> command >> tokens >> count;
    if (command != "latency" || texts.count(tokens) == 0 || count <= 0) {
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
      std::printf("{\"error\": \"%s\"}\n", quiver::JsonEscape(std::string(failed.message())).c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
