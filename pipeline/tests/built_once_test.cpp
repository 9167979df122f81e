// BuiltOnce (what keeps cuDNN's attention graphs for the process): one build
// per key, the same object for every get of it, nothing kept from a build
// that throws, and one build when threads ask for a key at once.
#include "cuda/built_once.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ppb::cuda {
namespace {

using Key = std::pair<int, int>;  // (device, shape), as the graphs' key

TEST(BuiltOnce, EachKeyIsBuiltOnceAndEveryGetSharesIt) {
  BuiltOnce<Key, std::string> kept;
  int calls = 0;
  const auto build = [&](std::string what) {
    return [&calls, what] {
      ++calls;
      return std::make_unique<std::string>(what);
    };
  };
  const std::shared_ptr<std::string> a = kept.get({0, 7}, build("a"));
  const std::shared_ptr<std::string> again = kept.get({0, 7}, build("not built"));
  EXPECT_EQ(a.get(), again.get());
  EXPECT_EQ(*again, "a");
  EXPECT_EQ(calls, 1);
  // Another shape, and the same shape on another device, are other keys.
  EXPECT_EQ(*kept.get({0, 8}, build("b")), "b");
  EXPECT_EQ(*kept.get({1, 7}, build("c")), "c");
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(kept.builds(), 3);
}

TEST(BuiltOnce, ABuildThatThrowsKeepsNothingAndTheNextGetBuildsAgain) {
  BuiltOnce<Key, std::string> kept;
  EXPECT_THROW((void)kept.get({0, 1},
                              []() -> std::unique_ptr<std::string> {
                                throw std::runtime_error("cuDNN refused the shape");
                              }),
               std::runtime_error);
  EXPECT_EQ(kept.builds(), 0);
  EXPECT_EQ(*kept.get({0, 1}, [] { return std::make_unique<std::string>("built"); }), "built");
  EXPECT_EQ(kept.builds(), 1);
}

TEST(BuiltOnce, ThreadsAskingForOneKeyAtOnceShareOneBuild) {
  BuiltOnce<Key, int> kept;
  std::atomic<int> calls{0};
  std::atomic<int> ready{0};
  constexpr int kThreads = 4;
  std::vector<std::shared_ptr<int>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      got[static_cast<size_t>(t)] = kept.get({0, 3}, [&] {
        ++calls;
        // Long enough that the others ask while it builds.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return std::make_unique<int>(42);
      });
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  for (const std::shared_ptr<int>& g : got) EXPECT_EQ(g.get(), got.front().get());
  EXPECT_EQ(*got.front(), 42);
}

}  // namespace
}  // namespace ppb::cuda
