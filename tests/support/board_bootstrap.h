// A transport::Bootstrap for ranks that are threads of one test process: every rank of a
// job shares one Board, and allgather waits (by deadline) until all ranks contributed.
// Header-only so transport tests can use it without linking the rest of the library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace collx {
namespace testing {

// What every rank of one in-process job shares.
struct Board {
  explicit Board(int size) : size(size) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<std::vector<uint8_t>>> blobs;
  std::map<std::string, int> contributed;
};

class BoardBootstrap : public transport::Bootstrap {
 public:
  BoardBootstrap(std::shared_ptr<Board> board, int rank) : board_(std::move(board)), rank_(rank) {}
  Status allgather(const std::string& name, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline deadline) override {
    std::unique_lock<std::mutex> lock(board_->mu);
    auto& slots = board_->blobs[name];
    slots.resize(static_cast<size_t>(board_->size));
    slots[static_cast<size_t>(rank_)] = mine;
    ++board_->contributed[name];
    board_->cv.notify_all();
    while (board_->contributed[name] < board_->size) {
      if (deadline.expired()) return make_status(COLLX_ERR_TIMEOUT, "test bootstrap: allgather '%s' timed out", name.c_str());
      board_->cv.wait_for(lock, std::chrono::milliseconds(10));
    }
    *all = board_->blobs[name];
    return Status::Ok();
  }

 private:
  std::shared_ptr<Board> board_;
  int rank_;
};

}  // namespace testing
}  // namespace collx
