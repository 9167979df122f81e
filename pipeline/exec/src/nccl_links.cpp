#include "ppb/exec/nccl_links.hpp"

#include <algorithm>
#include <cstddef>

#include "ppb/profiling/check.hpp"

namespace ppb {

std::vector<NcclLink> nccl_links(int ranks) {
  PPB_CHECK(ranks >= 1, "nccl_links: ranks must be >= 1");
  std::vector<NcclLink> links;
  for (int s = 0; s < ranks; ++s) {
    const int next = (s + 1) % ranks;
    for (const NcclLink l : {NcclLink{s, next}, NcclLink{next, s}}) {
      if (l.from != l.to && std::find(links.begin(), links.end(), l) == links.end())
        links.push_back(l);
    }
  }
  return links;
}

std::vector<std::vector<int>> nccl_creation_rounds(std::span<const NcclLink> links, int ranks) {
  std::vector<std::vector<int>> rounds;
  std::vector<std::vector<char>> busy;  // busy[round][rank]
  for (size_t i = 0; i < links.size(); ++i) {
    const NcclLink l = links[i];
    PPB_CHECK(l.from >= 0 && l.from < ranks && l.to >= 0 && l.to < ranks && l.from != l.to,
              "nccl_creation_rounds: bad link");
    size_t r = 0;
    while (r < rounds.size() &&
           (busy[r][static_cast<size_t>(l.from)] != 0 || busy[r][static_cast<size_t>(l.to)] != 0))
      ++r;
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back(static_cast<size_t>(ranks), 0);
    }
    rounds[r].push_back(static_cast<int>(i));
    busy[r][static_cast<size_t>(l.from)] = 1;
    busy[r][static_cast<size_t>(l.to)] = 1;
  }
  return rounds;
}

int nccl_link_index(std::span<const NcclLink> links, int from, int to) {
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].from == from && links[i].to == to) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace ppb
