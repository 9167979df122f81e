// The HTML report in a real browser: headless Chromium renders it to PNG; the
// test checks that the page loaded (the serialised DOM is complete, no console
// error) and that the charts are drawn (the PNG, decoded here with zlib, has
// the chart colours in quantity and content down the page). The screenshot is
// kept as a test artifact: <build>/reports/artifacts/report.png.
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fixtures.hpp"
#include "ppb/reports/report.hpp"

#ifndef PPB_REPORTS_ARTIFACT_DIR
#define PPB_REPORTS_ARTIFACT_DIR "."
#endif

namespace ppb::reports {
namespace {

namespace fs = std::filesystem;
using testing::FixtureSpec;

std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = ::pclose(p);
  return out;
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    int status = 0;
    std::string path = run(std::string("command -v ") + name + " 2>/dev/null", &status);
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
    if (status == 0 && !path.empty()) return path;
  }
  return "";
}

struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<std::array<uint8_t, 3>> pixels;  // row-major RGB
};

uint32_t be32(const std::string& d, size_t at) {
  return (uint32_t{static_cast<uint8_t>(d[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(d[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(d[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(d[at + 3])};
}

// 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes).
Image decode_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string d = ss.str();
  Image img;
  if (d.size() < 8 || d.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    ADD_FAILURE() << path << ": not a PNG";
    return img;
  }
  std::string idat;
  int bpp = 0;
  for (size_t pos = 8; pos + 8 <= d.size();) {
    const uint32_t len = be32(d, pos);
    const std::string kind = d.substr(pos + 4, 4);
    if (kind == "IHDR") {
      img.width = be32(d, pos + 8);
      img.height = be32(d, pos + 12);
      const int depth = static_cast<uint8_t>(d[pos + 16]);
      const int type = static_cast<uint8_t>(d[pos + 17]);
      const int interlace = static_cast<uint8_t>(d[pos + 20]);
      if (depth != 8 || (type != 2 && type != 6) || interlace != 0) {
        ADD_FAILURE() << "unsupported PNG: depth " << depth << " type " << type;
        return img;
      }
      bpp = type == 2 ? 3 : 4;
    } else if (kind == "IDAT") {
      idat += d.substr(pos + 8, len);
    }
    pos += 12 + len;
  }
  const size_t stride = size_t{img.width} * static_cast<size_t>(bpp);
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
      Z_OK) {
    ADD_FAILURE() << "PNG data does not inflate";
    return img;
  }
  std::vector<uint8_t> prev(stride, 0), line(stride);
  img.pixels.reserve(size_t{img.width} * img.height);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t* src = raw.data() + y * (stride + 1);
    const int filter = src[0];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? line[x - static_cast<size_t>(bpp)] : 0;
      const int b = prev[x];
      const int c = x >= static_cast<size_t>(bpp) ? prev[x - static_cast<size_t>(bpp)] : 0;
      int v = src[1 + x];
      switch (filter) {
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c;
          const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          v += (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          break;
      }
      line[x] = static_cast<uint8_t>(v & 255);
    }
    for (size_t x = 0; x < stride; x += static_cast<size_t>(bpp))
      img.pixels.push_back({line[x], line[x + 1], line[x + 2]});
    prev.swap(line);
  }
  return img;
}

TEST(ReportBrowser, ChromiumRendersTheHtmlReportWithCharts) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium not installed (ci/setup-deps installs the Debian package 'chromium')";
  const fs::path artifacts = PPB_REPORTS_ARTIFACT_DIR;
  fs::create_directories(artifacts);
  const std::string dir = testing::fresh_dir("results");
  for (const char* name :
       {"sync-1f1b", "async-1f1b", "1f1b", "gpipe", "interleaved-1f1b", "zb-h1"}) {
    FixtureSpec f;
    f.schedule = name;
    f.chunks = std::string(name) == "interleaved-1f1b" ? 2 : 1;
    testing::write_fixture(dir, f);
    f.microbatches = 16;
    testing::write_fixture(dir, f);
  }
  const std::string html = (artifacts / "report.html").string();
  const std::string png = (artifacts / "report.png").string();
  fs::remove(png);
  ReportOptions o;
  o.inputs = {dir};
  o.html = html;
  std::ostringstream out;
  ASSERT_EQ(run_report(o, out), 0);

  const std::string flags =
      " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
      "--disable-dev-shm-usage --user-data-dir=" +
      (artifacts / "chromium-profile").string();
  int status = 0;
  const std::string dom = run("timeout 120 " + chromium + flags + " --dump-dom file://" + html +
                                  " 2>" + (artifacts / "chromium-dom.log").string(),
                              &status);
  ASSERT_EQ(status, 0) << "chromium --dump-dom failed; see "
                       << (artifacts / "chromium-dom.log").string();
  EXPECT_NE(dom.find("</html>"), std::string::npos) << "page did not load completely";
  EXPECT_NE(dom.find("<h2>Verdict</h2>"), std::string::npos);
  size_t svgs = 0;
  for (size_t p = dom.find("<svg"); p != std::string::npos; p = dom.find("<svg", p + 1)) ++svgs;
  EXPECT_GE(svgs, 4u + 2 * 6);

  const std::string log = (artifacts / "chromium-screenshot.log").string();
  run("timeout 120 " + chromium + flags + " --screenshot=" + png +
          " --window-size=1400,3000 file://" + html + " >" + log + " 2>&1",
      &status);
  ASSERT_EQ(status, 0) << "chromium --screenshot failed; see " << log;
  ASSERT_TRUE(fs::exists(png)) << "no screenshot written; see " << log;
  std::ifstream lf(log);
  std::stringstream ls;
  ls << lf.rdbuf();
  EXPECT_EQ(ls.str().find("Uncaught"), std::string::npos) << ls.str();
  EXPECT_EQ(ls.str().find(":CONSOLE("), std::string::npos) << ls.str();

  const Image img = decode_png(png);
  ASSERT_EQ(img.width, 1400u);
  ASSERT_EQ(img.height, 3000u);
  size_t non_white = 0, coloured = 0;
  std::vector<bool> band(img.height / 100 + 1, false);
  std::map<uint32_t, size_t> counts;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const auto& p = img.pixels[i];
    if (p[0] < 235 || p[1] < 235 || p[2] < 235) {
      ++non_white;
      band[i / img.width / 100] = true;
      const int mx = std::max({p[0], p[1], p[2]}), mn = std::min({p[0], p[1], p[2]});
      if (mx - mn > 40) ++coloured;
    }
    ++counts[(uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]];
  }
  const double total = static_cast<double>(img.pixels.size());
  size_t bands = 0;
  for (bool b : band) bands += b ? 1 : 0;
  // Not a blank page: text, tables and charts cover a real share of it, all the way down.
  EXPECT_GT(non_white / total, 0.05);
  EXPECT_GT(static_cast<double>(bands) / static_cast<double>(band.size()), 0.9);
  // Charts drawn: filled areas in the schedule/category colours of the bar and memory charts.
  EXPECT_GT(coloured / total, 0.01);
  EXPECT_GT(counts[0x4e79a7], 2000u) << "blue (async-1f1b bars, activations) missing";
  EXPECT_GT(counts[0x59a14f], 1000u) << "green (1f1b bars) missing";
  EXPECT_GT(counts[0xe15759], 1000u) << "red (gpipe bars, gradients) missing";
}

}  // namespace
}  // namespace ppb::reports
