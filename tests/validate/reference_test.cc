// Host references of the harness's kernels, on values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "validate/reference.h"

namespace tpsim::validate {
namespace {

TEST(Reference, RmsNormPerGroup) {
  // Row [3, 4 | 6, 8], group 2: mean squares 12.5 and 50.
  std::vector<float> x = {3, 4, 6, 8}, y(4);
  RmsNormRef(x.data(), y.data(), 1, 4, 2);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-6);  // 0.848528
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5), 1e-6);  // 1.131371
  EXPECT_NEAR(y[2], 6 / std::sqrt(50.0), 1e-6);  // 0.848528
  EXPECT_NEAR(y[3], 8 / std::sqrt(50.0), 1e-6);
  // Whole row as one group: mean square (9 + 16 + 36 + 64) / 4 = 31.25.
  RmsNormRef(x.data(), y.data(), 1, 4, 4);
  EXPECT_NEAR(y[0], 3 / std::sqrt(31.25), 1e-6);
}

TEST(Reference, SoftmaxStableAndCausal) {
  // [0, ln 2]: e^0 : e^ln2 = 1 : 2 -> [1/3, 2/3].
  std::vector<float> x = {0.f, std::log(2.f)}, y(2);
  SoftmaxRef(x.data(), y.data(), 1, 2, 1.0f, 0, 0);
  EXPECT_NEAR(y[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(y[1], 2.0 / 3, 1e-6);
  // Large values do not overflow: [1000, 1000] -> [0.5, 0.5].
  std::vector<float> big = {1000.f, 1000.f};
  SoftmaxRef(big.data(), y.data(), 1, 2, 1.0f, 0, 0);
  EXPECT_NEAR(y[0], 0.5, 1e-6);
  EXPECT_NEAR(y[1], 0.5, 1e-6);
  // Causal, 2 tokens, nothing cached: row 0 sees column 0 only; row 1 sees both.
  std::vector<float> two = {5.f, 7.f, 0.f, 0.f}, out(4);
  SoftmaxRef(two.data(), out.data(), 2, 2, 1.0f, 0, 2);
  EXPECT_FLOAT_EQ(out[0], 1.f);
  EXPECT_FLOAT_EQ(out[1], 0.f);
  EXPECT_NEAR(out[2], 0.5, 1e-6);
  // Scale: [0, 2] at 0.5 is [0, 1] -> [1/(1+e), e/(1+e)].
  std::vector<float> s = {0.f, 2.f};
  SoftmaxRef(s.data(), y.data(), 1, 2, 0.5f, 0, 0);
  EXPECT_NEAR(y[0], 1 / (1 + std::exp(1.0)), 1e-6);  // 0.268941
}

TEST(Reference, RopeRotatesHalves) {
  // head_dim 2: one pair (c = 0), angle = pos * 10000^0 = pos. Row 0 at pos0 = 1: angle 1 rad.
  std::vector<float> x = {1.f, 0.f, 0.f, 1.f}, y(4);
  RopeRef(x.data(), y.data(), 2, 2, 2, 1);
  EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);  // 0.540302
  EXPECT_NEAR(y[1], std::sin(1.0), 1e-6);  // 0.841471
  // Row 1, pos 2: (0, 1) -> (-sin 2, cos 2).
  EXPECT_NEAR(y[2], -std::sin(2.0), 1e-6);
  EXPECT_NEAR(y[3], std::cos(2.0), 1e-6);
  // head_dim 4, c = 1: angle = pos * 10000^(-2/4) = pos / 100.
  std::vector<float> h = {0.f, 1.f, 0.f, 0.f}, hy(4);
  RopeRef(h.data(), hy.data(), 1, 4, 4, 100);
  EXPECT_NEAR(hy[1], std::cos(1.0), 1e-6);
  EXPECT_NEAR(hy[3], std::sin(1.0), 1e-6);
}

TEST(Reference, SiluMul) {
  std::vector<float> a = {0.f, 1.f, -1.f}, b = {3.f, 2.f, 1.f}, y(3);
  SiluMulRef(a.data(), b.data(), y.data(), 3);
  EXPECT_FLOAT_EQ(y[0], 0.f);
  EXPECT_NEAR(y[1], 2 / (1 + std::exp(-1.0)), 1e-6);  // 1.462117
  EXPECT_NEAR(y[2], -1 / (1 + std::exp(1.0)), 1e-6);  // -0.268941
}

TEST(Reference, RoundBf16TiesToEven) {
  EXPECT_EQ(RoundBf16(1.0f), 1.0f);
  // bf16 keeps 7 mantissa bits: neighbours of 1 are 1 and 1 + 1/128.
  EXPECT_EQ(RoundBf16(1.0f + 1.0f / 256), 1.0f);                             // halfway, even is 1
  EXPECT_EQ(RoundBf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);                 // halfway, even is 1 + 2/128
  EXPECT_EQ(RoundBf16(1.0f + 1.0f / 512), 1.0f);                             // below half: down
  EXPECT_EQ(RoundBf16(1.0f + 1.0f / 256 + 1.0f / 1024), 1.0f + 1.0f / 128);  // above half: up
  EXPECT_TRUE(std::isinf(RoundBf16(INFINITY)));
  EXPECT_TRUE(std::isnan(RoundBf16(NAN)));
}

}  // namespace
}  // namespace tpsim::validate
