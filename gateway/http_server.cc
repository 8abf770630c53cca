#include "gateway/http_server.h"

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cctype>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "common/thread_name.h"
#include "spdlog/spdlog.h"

namespace quiver::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr unsigned kHttp11 = 11;  // Beast's version numbers: 10 * major + minor

// A refusal's answer where no render_refusal is set: OpenAI's error shape.
HttpResponse ErrorAnswer(int status, std::string_view code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = StrCat("{\"error\":{\"message\":\"", JsonEscape(message),
                  "\",\"type\":\"invalid_request_error\",\"code\":\"", code, "\"}}");
  return r;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// The bytes of request bodies in flight, bounded: Acquire admits a body at once when it fits (or
// when nothing is in flight), else queues it first come first served until Release frees room.
class BodyBudget {
 public:
  explicit BodyBudget(size_t limit) : limit_(limit) {}

  // Held while a body is read, queued, parsed and handled; gives its bytes back when destroyed.
  class Grant {
   public:
    Grant(BodyBudget& budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    ~Grant() { budget_.Release(bytes_); }
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;

   private:
    BodyBudget& budget_;
    size_t bytes_;
  };

  // Calls `admitted` with the grant, at once or later on the thread of a Release.
  void Acquire(size_t bytes, std::function<void(std::shared_ptr<Grant>)> admitted) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!waiting_.empty() || !FitsLocked(bytes)) {
        waiting_.push_back({bytes, std::move(admitted)});
        return;
      }
      used_ += bytes;
    }
    admitted(std::make_shared<Grant>(*this, bytes));
  }

 private:
  struct Waiter {
    size_t bytes;
    std::function<void(std::shared_ptr<Grant>)> admitted;
  };

  bool FitsLocked(size_t bytes) const { return used_ == 0 || used_ + bytes <= limit_; }

  void Release(size_t bytes) {
    std::vector<Waiter> ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      used_ -= bytes;
      while (!waiting_.empty() && FitsLocked(waiting_.front().bytes)) {
        used_ += waiting_.front().bytes;
        ready.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    for (Waiter& w : ready) w.admitted(std::make_shared<Grant>(*this, w.bytes));
  }

  std::mutex mu_;
  const size_t limit_;
  size_t used_ = 0;
  std::deque<Waiter> waiting_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, asio::io_context& handlers, const HttpHandler& handler,
          const HttpServerOptions& options, const std::atomic<bool>& draining,
          std::atomic<int>& open, BodyBudget& budget)
      : stream_(std::move(socket)),
        handlers_(handlers),
        handler_(handler),
        options_(options),
        draining_(draining),
        open_(open),
        budget_(budget) {
    open_.fetch_add(1);
  }
  ~Session() { open_.fetch_sub(1); }

  void Start() { Read(/*first=*/true); }

 private:
  void Read(bool first = false) {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    // A keep-alive connection may idle between requests; a request's header has its own bound.
    stream_.expires_after(std::chrono::seconds(
        first || buffer_.size() > 0 ? options_.header_timeout_s : options_.idle_timeout_s));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The headers are in; nothing of the body was read yet.
  void OnHeader(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      Close();
      return;
    }
    if (ec == http::error::header_limit) {
      Refuse(431, "headers_too_large",
             StrCat("the request line and headers exceed the limit of ", options_.max_header_bytes,
                    " bytes"));
      return;
    }
    if (ec == http::error::body_limit) {  // a declared Content-Length over the limit
      RefuseBodyTooLarge();
      return;
    }
    if (ec) {
      Refuse(400, "malformed_request", StrCat("malformed HTTP request: ", ec.message()));
      return;
    }
    const auto& header = parser_->get();
    for (const auto& field : header) {
      if (field.name() != http::field::transfer_encoding) continue;
      const beast::string_view value = field.value();
      if (Lower(Trim(std::string_view(value.data(), value.size()))) != "chunked") {
        Refuse(400, "unsupported_transfer_encoding",
               StrCat("Transfer-Encoding '", std::string(field.value()),
                      "' is not supported: only chunked"));
        return;
      }
    }
    if (const auto length = parser_->content_length();
        length && *length > options_.max_body_bytes) {
      RefuseBodyTooLarge();
      return;
    }
    if (options_.check_headers) {
      if (std::optional<HttpResponse> answer = options_.check_headers(Convert(header, {}))) {
        Refuse(*std::move(answer));
        return;
      }
    }
    if (parser_->is_done()) {  // no body
      OnRead({});
      return;
    }
    // Room for the body first: a waiting request's body stays unread (and its client, if it asked
    // for 100 Continue, holds it back).
    const auto length = parser_->content_length();
    budget_.Acquire(length ? static_cast<size_t>(*length) : options_.max_body_bytes,
                    [self = shared_from_this()](std::shared_ptr<BodyBudget::Grant> grant) {
                      asio::post(self->stream_.get_executor(), [self, grant = std::move(grant)] {
                        self->grant_ = grant;
                        self->ReadBody();
                      });
                    });
  }

  void ReadBody() {
    const auto& header = parser_->get();
    const beast::string_view expect = header[http::field::expect];
    if (Lower(std::string_view(expect.data(), expect.size())) == "100-continue") {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      beast::error_code write_ec;
      asio::write(stream_.socket(), asio::buffer(kContinue.data(), kContinue.size()), write_ec);
      if (write_ec) {
        Close();
        return;
      }
    }
    stream_.expires_after(std::chrono::seconds(options_.body_timeout_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      Close();
      return;
    }
    if (ec == http::error::body_limit) {
      RefuseBodyTooLarge();
      return;
    }
    if (ec) {
      Refuse(400, "malformed_request", StrCat("malformed HTTP body: ", ec.message()));
      return;
    }
    http::request<http::string_body> req = parser_->release();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    HttpRequest in = Convert(req, std::move(req.body()));
    // While the handler runs nothing reads the socket, so a peek sees either the next pipelined
    // request (the client is there), nothing yet, or the end of the stream: the client closed (as
    // nginx, a close is taken as the client giving up).
    in.client_gone = [fd = stream_.socket().native_handle()] {
      char byte;
      const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return false;
      if (n == 0) return true;
      return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    };
    // Off the I/O thread: the handler tokenizes and waits for replicas, then answers. The body's
    // room in the budget is given back once the handler is done with it.
    asio::post(handlers_, [self = shared_from_this(), in = std::move(in), keep_alive, version,
                           grant = std::move(grant_)]() mutable {
      HttpResponse answer = self->handler_(in);
      in = HttpRequest();
      grant.reset();
      self->Answer(std::move(answer), keep_alive, version);
    });
  }

  template <typename Fields>
  static HttpRequest Convert(const http::request_header<Fields>& req, std::string body) {
    HttpRequest in;
    in.method = std::string(req.method_string());
    std::string target(req.target());
    in.target = target.substr(0, target.find('?'));
    for (const auto& field : req) {
      const beast::string_view name = field.name_string();
      in.headers[Lower(std::string_view(name.data(), name.size()))] = std::string(field.value());
    }
    in.body = std::move(body);
    return in;
  }

  void RefuseBodyTooLarge() {
    Refuse(413, "body_too_large",
           StrCat("request body exceeds the limit of ", options_.max_body_bytes, " bytes"));
  }

  // The server's own refusal, in the API's shape where it renders them.
  void Refuse(int status, std::string_view code, const std::string& message) {
    if (!options_.render_refusal) {
      Refuse(ErrorAnswer(status, code, message));
      return;
    }
    const HttpRequest so_far = SoFar();
    Refuse(options_.render_refusal(so_far, status, code, message), &so_far);
  }

  // An answer before (or instead of) the body: the rest of the request is never read, so the
  // connection closes after it.
  // `so_far`: SoFar(), where the caller has it already.
  void Refuse(HttpResponse r, const HttpRequest* so_far = nullptr) {
    if (options_.decorate_refusal && !r.headers.contains("X-Request-Id")) {  // a 401 has them
      options_.decorate_refusal(so_far != nullptr ? *so_far : SoFar(), r);
    }
    grant_.reset();
    Answer(std::move(r), /*keep_alive=*/false, kHttp11);
  }

  // The request's fields read so far (all of them, or those before the one that was refused).
  HttpRequest SoFar() const { return parser_ ? Convert(parser_->get(), {}) : HttpRequest(); }

  // On a handler thread (or on the I/O thread, for an error found while reading). Between a
  // request's read and its answer nothing else uses the socket (the next read starts after the
  // answer), so this sends what the socket takes at once, without waiting: a whole answer, for
  // any usual size, and no hop back to the I/O thread for it. What does not fit (a slow reader)
  // is written asynchronously on the connection's strand.
  void Answer(HttpResponse r, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version);
    res->set(http::field::server, "quiver");
    res->set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res->set(k, v);
    if (draining_.load()) keep_alive = false;  // clients open their next request elsewhere
    res->keep_alive(keep_alive);
    res->body() = std::move(r.body);
    res->prepare_payload();
    std::ostringstream head;  // the header only; the body is sent from where it is
    head << res->base();
    auto header = std::make_shared<std::string>(std::move(head).str());
    const std::string& body = res->body();
    const size_t total = header->size() + body.size();
    auto rest = [&](size_t sent) {  // what is still to send after `sent` bytes
      std::array<asio::const_buffer, 2> b{
          asio::buffer(*header) + std::min(sent, header->size()),
          asio::buffer(body) + (sent > header->size() ? sent - header->size() : 0)};
      return b;
    };
    size_t sent = 0;
    beast::error_code ec;
    tcp::socket& socket = stream_.socket();
    socket.non_blocking(true, ec);
    while (!ec && sent < total) sent += socket.write_some(rest(sent), ec);
    if (ec == asio::error::would_block) ec = {};
    const auto remaining = rest(sent);
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), res, header, remaining, sent, total, ec, keep_alive] {
                 if (ec) {
                   self->Close();
                 } else if (sent < total) {
                   asio::async_write(self->stream_, remaining,
                                     [self, res, header, keep_alive](beast::error_code ec, size_t) {
                                       self->AfterAnswer(ec, keep_alive);
                                     });
                 } else {
                   self->AfterAnswer({}, keep_alive);
                 }
               });
  }

  void AfterAnswer(beast::error_code ec, bool keep_alive) {
    if (ec || !keep_alive) {
      Close();
      return;
    }
    Read();
  }

  void Close() {
    grant_.reset();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  asio::io_context& handlers_;  // run by the handler threads (HttpServer::Impl)
  const HttpHandler& handler_;
  const HttpServerOptions& options_;
  const std::atomic<bool>& draining_;
  std::atomic<int>& open_;  // the server's count of open connections
  BodyBudget& budget_;
  std::shared_ptr<BodyBudget::Grant> grant_;  // the body's room, from admission to its handler
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  BodyBudget budget;  // before io: a session io destroys may still give a grant back
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::atomic<bool> draining{false};
  std::atomic<int> open_connections{0};
  int64_t over_logged = 0;  // refusals for --max-connections (logged one in a thousand)
  static constexpr const char* kBusyBody =
      "{\"error\":{\"message\":\"too many connections open (--max-connections); retry\","
      "\"type\":\"server_error\",\"code\":\"too_many_connections\"}}";
  // Handlers run here, on handler_threads threads named quiver-http-N; the guard keeps them
  // waiting for work until Stop.
  asio::io_context handlers;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> handlers_guard;
  std::vector<std::thread> handler_threads;
  std::vector<std::thread> io_threads;
  int port = 0;

  Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)),
        handler(std::move(h)),
        budget(options.max_body_bytes_in_flight > 0 ? options.max_body_bytes_in_flight
                                                    : 4 * options.max_body_bytes) {
    handlers_guard.emplace(asio::make_work_guard(handlers));
    for (int i = 0; i < std::max(1, options.handler_threads); ++i) {
      handler_threads.emplace_back([this, i] {
        SetThreadName(StrCat("quiver-http-", i));
        handlers.run();
      });
    }
  }

  ~Impl() { JoinHandlers(); }

  // Lets the handler threads finish what is queued, then joins them.
  void JoinHandlers() {
    handlers_guard.reset();
    for (std::thread& t : handler_threads) {
      if (t.joinable()) t.join();
    }
    handler_threads.clear();
  }

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        // Out of file descriptors (or another failure of accept itself): retrying at once would
        // spin a core on the same error; wait, say so, and try again.
        spdlog::warn("http: accept failed ({}); retrying in 100 ms", ec.message());
        accept_retry.expires_after(std::chrono::milliseconds(100));
        accept_retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      } else {
        // Responses go out as soon as they are written: without this, Nagle's algorithm holds a
        // response's last segment until the client acknowledges the previous one.
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        if (open_connections.load() >= options.max_connections) {
          // Over --max-connections: a short answer written at once (it fits any socket buffer),
          // then the connection closes; the client can retry, here or elsewhere. Nothing of the
          // request is read: the refusal's own headers (a fresh X-Request-Id) come without it.
          std::string busy =
              "HTTP/1.1 503 Service Unavailable\r\nServer: quiver\r\nContent-Type: "
              "application/json\r\nRetry-After: 1\r\nConnection: close\r\n";
          if (options.decorate_refusal) {
            HttpResponse refusal;
            options.decorate_refusal(HttpRequest(), refusal);
            for (const auto& [name, value] : refusal.headers) {
              busy += StrCat(name, ": ", value, "\r\n");
            }
          }
          busy +=
              StrCat("Content-Length: ", std::string_view(kBusyBody).size(), "\r\n\r\n", kBusyBody);
          beast::error_code write_ec;
          socket.non_blocking(true, write_ec);
          socket.write_some(asio::buffer(busy), write_ec);
          socket.shutdown(tcp::socket::shutdown_both, write_ec);
          if (over_logged++ % 1000 == 0) {
            spdlog::warn("http: {} connections open, at --max-connections; refusing with 503",
                         open_connections.load());
          }
        } else {
          std::make_shared<Session>(std::move(socket), handlers, handler, options, draining,
                                    open_connections, budget)
              ->Start();
        }
      }
      Accept();
    });
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() {
  try {
    Stop();
  } catch (const std::exception& e) {  // a join or a cancel that failed: said, not a terminate
    spdlog::error("http: stopping the server failed: {}", e.what());
  }
}

absl::Status HttpServer::Start() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(StrCat("--host '", impl_->options.host, "': ", ec.message()));
  }
  tcp::endpoint endpoint(address, static_cast<uint16_t>(impl_->options.port));
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(StrCat("cannot listen on ", impl_->options.host, ":",
                                         impl_->options.port, ": ", ec.message()));
  }
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->Accept();
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i) {
    impl_->io_threads.emplace_back([this] {
      SetThreadName("quiver-http-io");
      impl_->io.run();
    });
  }
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::BeginDrain() { impl_->draining.store(true); }

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->draining.store(true);
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->accept_retry.cancel();
  impl_->JoinHandlers();
  impl_->io.stop();
  for (std::thread& t : impl_->io_threads) {
    if (t.joinable()) t.join();
  }
  impl_->io_threads.clear();
}

}  // namespace quiver::gateway
