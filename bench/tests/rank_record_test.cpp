// The figures every rank counts, brought to rank 0 over real MPI ranks
// (run/rank_record.hpp): counts summed, and the text of the lowest rank that
// has one, whichever rank that is, whole. Run with 2 or more ranks.
#include "run/rank_record.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>

#include "ppb/exec/mpi.hpp"

namespace ppb::run {
namespace {

struct Ranks {
  int rank = 0;
  int size = 1;
};

Ranks ranks() {
  Ranks r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  return r;
}

TEST(SumCudaGraphs, TheEagerReasonIsTheLowestRanksThatRanEagerly) {
  const auto [rank, size] = ranks();
  ASSERT_GE(size, 2) << "run it on 2 or more ranks";
  // Rank 0 replayed everything; every other rank ran some actions eagerly,
  // each for a reason of its own.
  CudaGraphFigures mine{.captured = 1,
                        .replayed = int64_t{10} * (rank + 1),
                        .rebuilt = rank,
                        .eager = 0,
                        .eager_reason = ""};
  if (rank > 0) {
    mine.eager = 3;
    mine.eager_reason = "reason of rank " + std::to_string(rank);
  }
  const CudaGraphFigures all = sum_cuda_graphs(mine, rank, MPI_COMM_WORLD);
  if (rank != 0) return;  // the sums are rank 0's
  EXPECT_EQ(all.captured, size);
  EXPECT_EQ(all.replayed, 10 * size * (size + 1) / 2);
  EXPECT_EQ(all.rebuilt, size * (size - 1) / 2);
  EXPECT_EQ(all.eager, 3 * (size - 1));
  EXPECT_EQ(all.eager_reason, "reason of rank 1");
}

TEST(SumCudaGraphs, RankZerosReasonWinsAndNoEagerRankMeansNoReason) {
  const auto [rank, size] = ranks();
  ASSERT_GE(size, 2) << "run it on 2 or more ranks";
  CudaGraphFigures each;
  each.eager = 1;
  each.eager_reason = "reason of rank " + std::to_string(rank);
  EXPECT_EQ(sum_cuda_graphs(each, rank, MPI_COMM_WORLD).eager_reason, "reason of rank 0");
  CudaGraphFigures none;
  none.captured = 2;
  none.replayed = 5;
  const CudaGraphFigures all = sum_cuda_graphs(none, rank, MPI_COMM_WORLD);
  EXPECT_EQ(all.eager_reason, "");
  if (rank == 0) {
    EXPECT_EQ(all.replayed, 5 * size);
  }
}

TEST(SumGemmEpilogues, TheFirstRefusalIsTheLowestRefusingRanksNamingIt) {
  const auto [rank, size] = ranks();
  ASSERT_GE(size, 2) << "run it on 2 or more ranks";
  GemmEpilogueFigures mine;
  mine.fused = 4;
  if (rank == size - 1) {
    mine.refused = 2;
    mine.first_refusal = "bias + GeLU GEMM 2 x 12 x 3 fp32: no algorithm";
  }
  const GemmEpilogueFigures all = sum_gemm_epilogues(mine, rank, MPI_COMM_WORLD);
  EXPECT_EQ(all.first_refusal, "rank " + std::to_string(size - 1) +
                                   ": bias + GeLU GEMM 2 x 12 x 3 fp32: no algorithm");
  if (rank == 0) {
    EXPECT_EQ(all.fused, 4 * size);
    EXPECT_EQ(all.refused, 2);
  }
}

TEST(FirstFailure, EveryRankLearnsTheLowestFailingRankAndItsWholeText) {
  const auto [rank, size] = ranks();
  ASSERT_GE(size, 2) << "run it on 2 or more ranks";
  // A reason longer than any fixed buffer, whose end (the hint) must arrive.
  std::string reason(5000, 'x');
  reason += " hint at the end";
  const RankFailure failed =
      first_failure(rank >= 1 ? reason : std::string(), rank, MPI_COMM_WORLD);
  EXPECT_EQ(failed.rank, 1);
  EXPECT_EQ(failed.what, reason);
  const RankFailure none = first_failure(std::string(), rank, MPI_COMM_WORLD);
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.what, "");
}

}  // namespace
}  // namespace ppb::run

int main(int argc, char** argv) {
  ppb::MpiSession mpi;
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  // Every rank's verdict: a failure on any rank fails the test.
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}
