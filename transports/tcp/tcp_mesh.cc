#include "transports/tcp/tcp_mesh.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <memory>

#include "lib/common/log.h"

namespace collx {
namespace tcp {

namespace {

using Clock = std::chrono::steady_clock;

// The listener exists before its address is published, so a refusal can only be transient
// (a backlog hiccup); refusal for this long is a real error.
constexpr int kRefusedRetryMs = 2000;
constexpr int kMaxPollMs = 100;

// Moves bytes [*done, total) of a handshake message. 0: complete; EAGAIN: call again when
// ready; -1: the peer closed; else an errno.
int transfer(int fd, bool sending, uint8_t* buffer, size_t total, size_t* done) {
  while (*done < total) {
    ssize_t n = sending ? ::send(fd, buffer + *done, total - *done, MSG_NOSIGNAL)
                        : ::recv(fd, buffer + *done, total - *done, 0);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 && !sending) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return EAGAIN;
    return errno;
  }
  return 0;
}

int ms_until(Clock::time_point when) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left) + 1;
}

// Each socket's handshake: HELLO from the connecting rank, CHALLENGE back, AUTH (the job
// token answer) from the connecting rank, HELLO_ACK (with the accepting rank's MAC) back.
// No socket joins the mesh before both sides checked each other's MAC (wire.h, auth.h).
struct Outgoing {
  enum State { kWaitRetry, kConnecting, kSending, kReceivingChallenge, kSendingAuth, kReceiving, kDone };
  int peer = 0;
  int index = 0;
  UniqueFd fd;
  State state = kWaitRetry;
  uint8_t hello[kHelloBytes];
  uint8_t challenge[kChallengeBytes];
  uint8_t auth_answer[kAuthBytes];
  uint8_t ack[kHelloAckBytes];
  auth::Nonce server_nonce{}, client_nonce{};
  size_t done_bytes = 0;
  Clock::time_point retry_at = Clock::now();
  Clock::time_point first_refusal;
  bool refused_before = false;
  int backoff_ms = 5;
};

struct Incoming {
  enum State { kReading, kSendingChallenge, kReadingAuth, kSending };
  UniqueFd fd;
  std::string remote;
  Clock::time_point accepted_at = Clock::now();
  State state = kReading;
  uint8_t hello[kHelloBytes];
  uint8_t challenge[kChallengeBytes];
  uint8_t auth_answer[kAuthBytes];
  uint8_t ack[kHelloAckBytes];
  size_t done_bytes = 0;
  Hello parsed;
  auth::Nonce server_nonce{};
  // A HELLO from this communicator with a configuration that cannot work: reported as an
  // error only once the peer proved it knows the job token (else anyone could abort setup).
  std::string fatal_why;
};

bool awaits_input(Incoming::State state) {
  return state == Incoming::kReading || state == Incoming::kReadingAuth;
}

const char* state_name(Outgoing::State state) {
  switch (state) {
    case Outgoing::kWaitRetry: return "retrying after a refusal";
    case Outgoing::kConnecting: return "connecting";
    case Outgoing::kSending: return "sending HELLO";
    case Outgoing::kReceivingChallenge: return "waiting for CHALLENGE";
    case Outgoing::kSendingAuth: return "sending AUTH";
    case Outgoing::kReceiving: return "waiting for HELLO_ACK";
    case Outgoing::kDone: return "connected";
  }
  return "?";
}

class MeshBuilder {
 public:
  MeshBuilder(const MeshParams& params, int listen_fd, const std::vector<SocketAddress>& addresses, MeshSockets* out)
      : p_(params), listen_fd_(listen_fd), addresses_(addresses), out_(out) {}

  Status run();

 private:
  Status step_outgoing(Outgoing& o, short revents);
  Status accept_pending();
  Status step_incoming(Incoming& in, short revents, bool* finished);
  Status answer_challenge(Outgoing& o, const std::string& where);
  Status closed_during_handshake(const Outgoing& o, int rc, const std::string& where) const;
  std::string check_answer(const Incoming& in, const AuthAnswer& answer) const;
  void drop(const Incoming& in, const std::string& why) const;
  Status connect_error(const Outgoing& o, int error, const char* extra) const;
  Status timeout_error() const;
  bool complete() const { return missing_ == 0; }

  const MeshParams& p_;
  int listen_fd_;
  const std::vector<SocketAddress>& addresses_;
  MeshSockets* out_;
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
  int missing_ = 0;
  Clock::time_point start_ = Clock::now();
};

Status MeshBuilder::connect_error(const Outgoing& o, int error, const char* extra) const {
  return make_status(COLLX_ERR_SYSTEM, "rank %d cannot connect to rank %d at %s: %s%s", p_.rank, o.peer,
                     addresses_[o.peer].to_string().c_str(), errno_string(error).c_str(), extra);
}

Status MeshBuilder::timeout_error() const {
  std::string missing;
  for (const auto& o : outgoing_) {
    if (o->state == Outgoing::kDone) continue;
    if (!missing.empty()) missing += ", ";
    missing += string_printf("to rank %d at %s (socket %d: %s)", o->peer, addresses_[o->peer].to_string().c_str(),
                             o->index, state_name(o->state));
  }
  for (int peer = p_.rank + 1; peer < p_.size; ++peer) {
    int absent = 0;
    for (const UniqueFd& fd : (*out_)[peer]) absent += fd.valid() ? 0 : 1;
    if (absent == 0) continue;
    if (!missing.empty()) missing += ", ";
    missing += string_printf("from rank %d (%d of %d sockets not accepted yet)", peer, absent, p_.sockets_per_peer);
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
  return make_status(COLLX_ERR_TIMEOUT, "rank %d: TCP connection setup timed out after %lld ms; not connected: %s",
                     p_.rank, static_cast<long long>(elapsed), missing.c_str());
}

Status MeshBuilder::step_outgoing(Outgoing& o, short revents) {
  if (o.state == Outgoing::kWaitRetry) {
    if (Clock::now() < o.retry_at) return Status::Ok();
    int rc = start_connect(addresses_[o.peer], &o.fd, p_.socket_buffer_bytes);
    if (rc == 0 || rc == EINPROGRESS) {
      o.state = Outgoing::kConnecting;
      Status liveness = apply_socket_liveness(o.fd.get(), p_.liveness);
      if (!liveness.ok()) return liveness.with_context(string_printf("rank %d: socket to rank %d: ", p_.rank, o.peer));
      return Status::Ok();
    }
    return connect_error(o, rc, "");
  }
  if (o.state == Outgoing::kConnecting) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Status::Ok();
    int error = socket_error(o.fd.get());
    if (error == ECONNREFUSED) {
      Clock::time_point now = Clock::now();
      if (!o.refused_before) {
        o.refused_before = true;
        o.first_refusal = now;
      }
      if (now - o.first_refusal > std::chrono::milliseconds(kRefusedRetryMs)) {
        return connect_error(o, error, " (refused for 2 s although its listener exists before its address is published: is rank alive and the address right?)");
      }
      o.fd.reset();
      o.state = Outgoing::kWaitRetry;
      o.retry_at = now + std::chrono::milliseconds(o.backoff_ms);
      o.backoff_ms = o.backoff_ms * 2 > 200 ? 200 : o.backoff_ms * 2;
      return Status::Ok();
    }
    if (error == EHOSTUNREACH || error == ENETUNREACH) {
      return connect_error(o, error, " (the address it published is not reachable from this host; "
                                     "set COLLX_SOCKET_IFNAME to an interface the hosts share)");
    }
    if (error != 0) return connect_error(o, error, "");
    Hello hello;
    hello.comm_id = p_.comm_id;
    hello.src_rank = p_.rank;
    hello.dst_rank = o.peer;
    hello.socket_index = static_cast<uint32_t>(o.index);
    hello.sockets_per_peer = static_cast<uint32_t>(p_.sockets_per_peer);
    encode_hello(hello, o.hello);
    o.state = Outgoing::kSending;
    o.done_bytes = 0;
    revents = POLLOUT;
  }
  const std::string where = addresses_[o.peer].to_string();
  if (o.state == Outgoing::kSending) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(o.fd.get(), true, o.hello, kHelloBytes, &o.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    if (rc != 0) return connect_error(o, rc < 0 ? ECONNRESET : rc, " (while sending HELLO)");
    o.state = Outgoing::kReceivingChallenge;
    o.done_bytes = 0;
    return Status::Ok();
  }
  if (o.state == Outgoing::kReceivingChallenge) {
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(o.fd.get(), false, o.challenge, kChallengeBytes, &o.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    if (rc != 0) return closed_during_handshake(o, rc, where);
    COLLX_RETURN_IF_ERROR(answer_challenge(o, where));
    o.state = Outgoing::kSendingAuth;
    o.done_bytes = 0;
    revents = POLLOUT;
  }
  if (o.state == Outgoing::kSendingAuth) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(o.fd.get(), true, o.auth_answer, kAuthBytes, &o.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    if (rc != 0) return connect_error(o, rc < 0 ? ECONNRESET : rc, " (while sending AUTH)");
    o.state = Outgoing::kReceiving;
    o.done_bytes = 0;
    return Status::Ok();
  }
  if (o.state == Outgoing::kReceiving) {
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(o.fd.get(), false, o.ack, kHelloAckBytes, &o.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    if (rc != 0) return closed_during_handshake(o, rc, where);
    HelloAck ack;
    std::string why;
    if (!decode_hello_ack(o.ack, &ack, &why)) {
      return make_status(COLLX_ERR_PROTOCOL, "rank %d: the peer at %s (expected rank %d) answered: %s", p_.rank,
                         where.c_str(), o.peer, why.c_str());
    }
    if (ack.comm_id != p_.comm_id || ack.rank != o.peer) {
      return make_status(COLLX_ERR_PROTOCOL,
                         "rank %d: the peer at %s is rank %d of communicator 0x%" PRIx64
                         ", expected rank %d of communicator 0x%" PRIx64 " (stale address?)",
                         p_.rank, where.c_str(), ack.rank, ack.comm_id, o.peer, p_.comm_id);
    }
    if (ack.sockets_per_peer != static_cast<uint32_t>(p_.sockets_per_peer)) {
      return make_status(COLLX_ERR_INVALID_USAGE,
                         "rank %d uses %u sockets per peer, rank %d uses %d (COLLX_TCP_NSOCKS must be equal on all ranks)",
                         o.peer, ack.sockets_per_peer, p_.rank, p_.sockets_per_peer);
    }
    if (!p_.job_token.empty() &&
        !auth::verify_mac(p_.job_token, o.server_nonce, o.client_nonce, auth::Role::kServer, ack.mac)) {
      return make_status(COLLX_ERR_PROTOCOL,
                         "rank %d: the peer at %s (expected rank %d) failed to prove it knows the job token (its MAC "
                         "is wrong): it is not a rank of this job",
                         p_.rank, where.c_str(), o.peer);
    }
    (*out_)[o.peer][o.index] = std::move(o.fd);
    o.state = Outgoing::kDone;
    --missing_;
  }
  return Status::Ok();
}

Status MeshBuilder::closed_during_handshake(const Outgoing& o, int rc, const std::string& where) const {
  return make_status(COLLX_ERR_REMOTE,
                     "rank %d: rank %d at %s closed the connection during the handshake (%s); it rejected our HELLO "
                     "or our job token (its log says why: is COLLX_JOB_TOKEN the same on every rank?) or it is not "
                     "rank %d of this communicator",
                     p_.rank, o.peer, where.c_str(), rc < 0 ? "end of stream" : errno_string(rc).c_str(), o.peer);
}

// The connecting side's AUTH: both sides must use a token or neither; with one, our nonce and
// MAC over the peer's nonce.
Status MeshBuilder::answer_challenge(Outgoing& o, const std::string& where) {
  Challenge challenge;
  std::string why;
  if (!decode_challenge(o.challenge, &challenge, &why)) {
    return make_status(COLLX_ERR_PROTOCOL, "rank %d: the peer at %s (expected rank %d) answered: %s", p_.rank,
                       where.c_str(), o.peer, why.c_str());
  }
  const bool have_token = !p_.job_token.empty();
  if (challenge.token_required && !have_token) {
    return make_status(COLLX_ERR_PROTOCOL,
                       "rank %d: rank %d at %s requires the job token: set COLLX_JOB_TOKEN to the job's token on "
                       "every rank",
                       p_.rank, o.peer, where.c_str());
  }
  if (!challenge.token_required && have_token) {
    return make_status(COLLX_ERR_PROTOCOL,
                       "rank %d: the peer at %s (expected rank %d) uses no job token but COLLX_JOB_TOKEN is set "
                       "here: set the same token on every rank",
                       p_.rank, where.c_str(), o.peer);
  }
  AuthAnswer answer;
  answer.has_token = have_token;
  if (have_token) {
    o.server_nonce = challenge.nonce;
    COLLX_RETURN_IF_ERROR(auth::make_nonce(&o.client_nonce));
    COLLX_RETURN_IF_ERROR(
        auth::compute_mac(p_.job_token, o.server_nonce, o.client_nonce, auth::Role::kClient, &answer.mac));
    answer.nonce = o.client_nonce;
  }
  encode_auth(answer, o.auth_answer);
  return Status::Ok();
}

// Why an accepted connection's AUTH is refused ("" when it proves the token, or when neither
// side uses one).
std::string MeshBuilder::check_answer(const Incoming& in, const AuthAnswer& answer) const {
  if (p_.job_token.empty()) {
    return answer.has_token ? "it uses a job token, this rank has none (COLLX_JOB_TOKEN unset here?)" : "";
  }
  if (!answer.has_token) return "it presents no job token (COLLX_JOB_TOKEN unset on that rank?)";
  if (!auth::verify_mac(p_.job_token, in.server_nonce, answer.nonce, auth::Role::kClient, answer.mac))
    return "wrong job token (its MAC does not match; COLLX_JOB_TOKEN differs)";
  return "";
}

void MeshBuilder::drop(const Incoming& in, const std::string& why) const {
  COLLX_WARN(NET, "rank %d: dropped connection from %s: %s", p_.rank, in.remote.c_str(), why.c_str());
}

Status MeshBuilder::accept_pending() {
  for (;;) {
    sockaddr_storage remote{};
    socklen_t length = sizeof remote;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&remote), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EMFILE || error == ENFILE) {
        // The peer's connection stays queued and poll reports it again at once: waiting for
        // the deadline would spin. Nothing here will free descriptors, so fail now.
        return make_status(COLLX_ERR_SYSTEM,
                           "rank %d: cannot accept the TCP connections of its peers: %s (raise the open-file limit, "
                           "ulimit -n, or use fewer sockets per peer, COLLX_TCP_NSOCKS)",
                           p_.rank, errno_string(error).c_str());
      }
      if (error != EAGAIN && error != EWOULDBLOCK) {
        COLLX_WARN(NET, "rank %d: accept on the listen port failed: %s", p_.rank, errno_string(error).c_str());
      }
      return Status::Ok();
    }
    auto in = std::make_unique<Incoming>();
    in->fd.reset(fd);
    in->remote = address_from_sockaddr(reinterpret_cast<sockaddr*>(&remote), length).to_string();
    incoming_.push_back(std::move(in));
  }
}

Status MeshBuilder::step_incoming(Incoming& in, short revents, bool* finished) {
  *finished = false;
  if (in.state == Incoming::kReading) {
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(in.fd.get(), false, in.hello, kHelloBytes, &in.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    *finished = true;
    if (rc != 0) {
      drop(in, string_printf("closed before a complete HELLO (%zu of %zu bytes)", in.done_bytes, kHelloBytes));
      return Status::Ok();
    }
    std::string why;
    bool fatal = false;
    if (!decode_hello(in.hello, &in.parsed, &why)) {
      drop(in, why);
      return Status::Ok();
    }
    why = hello_rejection(
        in.parsed, p_, [this](int peer, int index) { return (*out_)[peer][index].valid(); }, &fatal);
    if (!why.empty() && !fatal) {
      drop(in, why);
      return Status::Ok();
    }
    in.fatal_why = why;
    Challenge challenge;
    challenge.token_required = !p_.job_token.empty();
    if (challenge.token_required) COLLX_RETURN_IF_ERROR(auth::make_nonce(&in.server_nonce));
    challenge.nonce = in.server_nonce;
    encode_challenge(challenge, in.challenge);
    in.state = Incoming::kSendingChallenge;
    in.done_bytes = 0;
    *finished = false;
    revents = POLLOUT;
  }
  if (in.state == Incoming::kSendingChallenge) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(in.fd.get(), true, in.challenge, kChallengeBytes, &in.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    if (rc != 0) {
      *finished = true;
      drop(in, "closed before its CHALLENGE was sent");
      return Status::Ok();
    }
    in.state = Incoming::kReadingAuth;
    in.done_bytes = 0;
    return Status::Ok();
  }
  if (in.state == Incoming::kReadingAuth) {
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return Status::Ok();
    int rc = transfer(in.fd.get(), false, in.auth_answer, kAuthBytes, &in.done_bytes);
    if (rc == EAGAIN) return Status::Ok();
    *finished = true;
    if (rc != 0) {
      drop(in, string_printf("closed before a complete AUTH (%zu of %zu bytes)", in.done_bytes, kAuthBytes));
      return Status::Ok();
    }
    AuthAnswer answer;
    std::string why;
    if (!decode_auth(in.auth_answer, &answer, &why) || !(why = check_answer(in, answer)).empty()) {
      drop(in, why);
      return Status::Ok();
    }
    if (!in.fatal_why.empty()) return make_status(COLLX_ERR_INVALID_USAGE, "rank %d: %s", p_.rank, in.fatal_why.c_str());
    if ((*out_)[in.parsed.src_rank][in.parsed.socket_index].valid()) {  // taken while this one authenticated
      drop(in, string_printf("duplicate connection for socket %u of rank %d", in.parsed.socket_index,
                             in.parsed.src_rank));
      return Status::Ok();
    }
    HelloAck ack;
    if (!p_.job_token.empty()) {
      COLLX_RETURN_IF_ERROR(
          auth::compute_mac(p_.job_token, in.server_nonce, answer.nonce, auth::Role::kServer, &ack.mac));
    }
    ack.comm_id = p_.comm_id;
    ack.rank = p_.rank;
    ack.sockets_per_peer = static_cast<uint32_t>(p_.sockets_per_peer);
    encode_hello_ack(ack, in.ack);
    in.state = Incoming::kSending;
    in.done_bytes = 0;
    *finished = false;
    revents = POLLOUT;
  }
  if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Status::Ok();
  int rc = transfer(in.fd.get(), true, in.ack, kHelloAckBytes, &in.done_bytes);
  if (rc == EAGAIN) return Status::Ok();
  *finished = true;
  if (rc != 0) {
    return make_status(COLLX_ERR_REMOTE, "rank %d: rank %d (%s) closed its connection during the handshake: %s",
                       p_.rank, in.parsed.src_rank, in.remote.c_str(),
                       rc < 0 ? "end of stream" : errno_string(rc).c_str());
  }
  Status nodelay = set_nodelay(in.fd.get());
  if (!nodelay.ok()) return nodelay;
  (*out_)[in.parsed.src_rank][in.parsed.socket_index] = std::move(in.fd);
  --missing_;
  return Status::Ok();
}

Status MeshBuilder::run() {
  out_->clear();
  out_->resize(p_.size);
  for (int peer = 0; peer < p_.size; ++peer) {
    if (peer != p_.rank) (*out_)[peer].resize(p_.sockets_per_peer);
  }
  for (int peer = 0; peer < p_.rank; ++peer) {
    for (int index = 0; index < p_.sockets_per_peer; ++index) {
      auto o = std::make_unique<Outgoing>();
      o->peer = peer;
      o->index = index;
      outgoing_.push_back(std::move(o));
    }
  }
  missing_ = (p_.size - 1) * p_.sockets_per_peer;

  std::vector<pollfd> fds;
  while (!complete()) {
    if (p_.deadline.expired()) return timeout_error();
    // Outgoing sockets due for a (re)try start now; the others wait for poll.
    for (auto& o : outgoing_) {
      if (o->state == Outgoing::kWaitRetry) COLLX_RETURN_IF_ERROR(step_outgoing(*o, 0));
    }
    int timeout = p_.deadline.remaining_ms(kMaxPollMs);
    fds.clear();
    fds.push_back(pollfd{listen_fd_, POLLIN, 0});
    for (auto& o : outgoing_) {
      short events = 0;
      if (o->state == Outgoing::kConnecting || o->state == Outgoing::kSending || o->state == Outgoing::kSendingAuth)
        events = POLLOUT;
      if (o->state == Outgoing::kReceiving || o->state == Outgoing::kReceivingChallenge) events = POLLIN;
      if (o->state == Outgoing::kWaitRetry) timeout = std::min(timeout, ms_until(o->retry_at));
      fds.push_back(pollfd{events ? o->fd.get() : -1, events, 0});
    }
    for (auto& in : incoming_) {
      fds.push_back(pollfd{in->fd.get(), static_cast<short>(awaits_input(in->state) ? POLLIN : POLLOUT), 0});
      timeout = std::min(timeout, ms_until(in->accepted_at + std::chrono::milliseconds(p_.hello_timeout_ms)));
    }
    int ready = ::poll(fds.data(), fds.size(), timeout);
    if (ready < 0 && errno != EINTR) return system_error("poll (TCP connection setup)", errno);
    if (ready <= 0) {
      for (auto& pfd : fds) pfd.revents = 0;
    }
    size_t slot = 1;
    for (auto& o : outgoing_) {
      short revents = fds[slot++].revents;
      if (revents) COLLX_RETURN_IF_ERROR(step_outgoing(*o, revents));
    }
    // Incoming connections, in the order of `fds` (accepting below appends new ones).
    std::vector<std::unique_ptr<Incoming>> still_open;
    const Clock::time_point now = Clock::now();
    for (auto& in : incoming_) {
      short revents = fds[slot++].revents;
      bool finished = false;
      if (revents) COLLX_RETURN_IF_ERROR(step_incoming(*in, revents, &finished));
      if (!finished && now - in->accepted_at > std::chrono::milliseconds(p_.hello_timeout_ms)) {
        COLLX_WARN(NET, "rank %d: dropped connection from %s: no HELLO within %d ms", p_.rank, in->remote.c_str(),
                   p_.hello_timeout_ms);
        finished = true;
      }
      if (!finished) still_open.push_back(std::move(in));
    }
    incoming_ = std::move(still_open);
    if (fds[0].revents) COLLX_RETURN_IF_ERROR(accept_pending());
  }
  return Status::Ok();
}

}  // namespace

std::string hello_rejection(const Hello& hello, const MeshParams& params,
                            const std::function<bool(int peer, int index)>& is_connected, bool* fatal) {
  *fatal = false;
  if (hello.comm_id != params.comm_id) {
    return string_printf("HELLO for communicator 0x%" PRIx64 ", this is communicator 0x%" PRIx64, hello.comm_id,
                         params.comm_id);
  }
  if (hello.dst_rank != params.rank) {
    return string_printf("HELLO addressed to rank %d, this is rank %d", hello.dst_rank, params.rank);
  }
  if (hello.src_rank <= params.rank || hello.src_rank >= params.size) {
    return string_printf("HELLO from rank %d, but only ranks %d..%d connect to rank %d", hello.src_rank,
                         params.rank + 1, params.size - 1, params.rank);
  }
  if (hello.sockets_per_peer != static_cast<uint32_t>(params.sockets_per_peer)) {
    *fatal = true;
    return string_printf("rank %d uses %u sockets per peer, this rank uses %d (COLLX_TCP_NSOCKS must be equal on all ranks)",
                         hello.src_rank, hello.sockets_per_peer, params.sockets_per_peer);
  }
  if (hello.socket_index >= static_cast<uint32_t>(params.sockets_per_peer)) {
    return string_printf("HELLO for socket %u of %d", hello.socket_index, params.sockets_per_peer);
  }
  if (is_connected(hello.src_rank, static_cast<int>(hello.socket_index))) {
    return string_printf("duplicate connection for socket %u of rank %d (already connected; reconnecting is not supported)",
                         hello.socket_index, hello.src_rank);
  }
  return "";
}

Status build_mesh(const MeshParams& params, int listen_fd, const std::vector<SocketAddress>& addresses,
                  MeshSockets* out) {
  MeshBuilder builder(params, listen_fd, addresses, out);
  return builder.run();
}

}  // namespace tcp
}  // namespace collx
