// Writes result folders for the command-line test of `pipebench report`
// (cli_test.cmake), with the same fixtures as the unit tests:
//   OUT/base      1f1b and gpipe (P=4, M=8)
//   OUT/slow      1f1b 10% slower than base, gpipe 5% slower
//   OUT/near      both 5% slower
//   OUT/slow_again  slow once more (a re-run that reproduces slow)
//   OUT/bad       one good result and one truncated file
//   OUT/empty     no result
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixtures.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: reports_fixture_gen OUT\n");
    return 2;
  }
  namespace fs = std::filesystem;
  using ppb::reports::testing::FixtureSpec;
  using ppb::reports::testing::write_fixture;
  const fs::path out = argv[1];
  fs::remove_all(out);
  // Ten timed steps each (enough for the gate's U test), or 3 (too few).
  auto pair = [&](const std::string& dir, double slow_1f1b, double slow_gpipe, int steps = 10,
                  const std::string& date = "2026-11-29T07:00:00Z") {
    FixtureSpec a;
    a.schedule = "1f1b";
    a.slowdown = slow_1f1b;
    a.steps = steps;
    a.date = date;
    write_fixture((out / dir).string(), a);
    FixtureSpec b = a;
    b.schedule = "gpipe";
    b.slowdown = slow_gpipe;
    return write_fixture((out / dir).string(), b);
  };
  pair("base", 1.0, 1.0);
  pair("slow", 1.10, 1.05);
  pair("near", 1.05, 1.05);
  pair("slow_again", 1.10, 1.05);
  pair("few/base", 1.0, 1.0, 3);
  pair("few/slow", 1.10, 1.0, 3);
  for (int night = 1; night <= 3; ++night) {
    pair("nights/n" + std::to_string(night), 1.0, 1.0, 10,
         "2026-11-2" + std::to_string(night) + "T02:00:00Z");
  }
  const std::string good = pair("bad", 1.0, 1.0);
  std::ifstream in(good);
  std::stringstream s;
  s << in.rdbuf();
  std::ofstream((out / "bad" / "truncated.json").string()) << s.str().substr(0, s.str().size() / 2);
  fs::create_directories(out / "empty");
  return 0;
}
