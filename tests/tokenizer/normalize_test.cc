// Unicode normalization (tokenizer/unicode.h): the same result as utf8proc's own utf8proc_map on
// random strings heavy in combining marks, every form; and work linear in the input (a run of
// combining marks of alternating classes was quadratic: issue 17), checked by timing growth.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>

#include "tokenizer/unicode.h"

namespace quiver::tokenizer {
namespace {

std::string Reference(const std::string& in, NormalizationForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalizationForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalizationForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalizationForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                          static_cast<utf8proc_ssize_t>(in.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  std::string s = n >= 0 ? std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n)) : in;
  std::free(out);
  return s;
}

constexpr NormalizationForm kForms[] = {NormalizationForm::kNFC, NormalizationForm::kNFD,
                                        NormalizationForm::kNFKC, NormalizationForm::kNFKD};

TEST(NormalizeTest, EqualsUtf8procOnMarkHeavyRandomText) {
  // Letters, precomposed letters, Hangul, compatibility characters and combining marks of
  // several classes (220, 230, 202, 1, 216, 7...).
  const char32_t pool[] = {U'a',      U'e',      U'o',      U'A',      U'\u00e9', U'\u00c5',
                           U'\u1e69', U'\uac00', U'\ufb01', U'\u2460', U'\u0301', U'\u0316',
                           U'\u0327', U'\u0334', U'\u031b', U'\u093c', U'\u05b0', U'\u0f71',
                           U'\u0300', U'\u0323', U'\u1100', U'\u1161', U'\u11a8', U' ',
                           U'\u3099', U'\u304b'};
  std::mt19937 rng(11);
  for (int t = 0; t < 3000; ++t) {
    std::string in;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) AppendUtf8(pool[rng() % std::size(pool)], in);
    for (NormalizationForm form : kForms) {
      std::string got;
      Normalize(in, form, got);
      ASSERT_EQ(got, Reference(in, form)) << "input " << in << " form " << static_cast<int>(form);
    }
  }
}

double Seconds(const std::string& in, NormalizationForm form) {
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  Normalize(in, form, out);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Growth, not speed: sixteen times the input takes about sixteen times as long (n log n: 4.3
// per 4x step measured before, so about 18 expected over 16x, not measured at this step; the
// quadratic ordering it replaced would take 256 times as long). The bound, 64, sits a factor of
// 4 from each, so a loaded machine cannot fail it (the 4x step it replaced, bounded at 8 against
// 4.3 and 16, failed once in a CI run at 8.5); each size is the best of five runs, the two sizes
// timed in turns so that a slow spell of the host falls on both, and large enough (milliseconds)
// to time.
TEST(NormalizeTest, CombiningMarkRunsCostLinearTime) {
  for (NormalizationForm form : kForms) {
    const auto marks = [](int pairs) {
      std::string in = "a";
      for (int i = 0; i < pairs; ++i) {
        AppendUtf8(U'\u0316', in);  // class 220
        AppendUtf8(U'\u0301', in);  // class 230
      }
      return in;
    };
    const std::string small = marks(16000), large = marks(256000);
    double best_small = 1e9, best_large = 1e9;
    for (int r = 0; r < 5; ++r) {
      best_small = std::min(best_small, Seconds(small, form));
      best_large = std::min(best_large, Seconds(large, form));
    }
    EXPECT_LT(best_large, 64.0 * best_small + 0.005)
        << "256,000 pairs: " << best_large << " s after " << best_small << " s for 16,000";
    // utf8proc's own ordering took 2.46 s at 16,000 pairs here (x4 per doubling).
    EXPECT_LT(best_large, 2.0) << "256,000 pairs";
  }
}

}  // namespace
}  // namespace quiver::tokenizer
