// shortest_common_string against a brute-force reference: small random regexes over {a, b, c},
// every string up to length 4 over {a, b, c} matched by std::regex (an independent matcher). Where the
// reference finds a common string, ours finds one of the same (least) length; where it finds
// none, ours finds none or a longer one that both regexes match.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "guided/dfa_intersection.h"

using namespace tpbatch::guided;

namespace {

// A random regex in the syntax both engines read the same: literals, [..], (?:..), |, * + ? {m,n}.
std::string random_regex(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const char* atoms[] = {"a", "b", "c", "[ab]", "[bc]", "[^a]"};
  std::string r;
  const int parts = 1 + pick(3);
  for (int p = 0; p < parts; ++p) {
    std::string atom = depth > 0 && pick(3) == 0
                           ? "(?:" + random_regex(rng, depth - 1) + "|" + random_regex(rng, depth - 1) + ")"
                           : atoms[pick(6)];
    const char* quantifiers[] = {"", "", "*", "+", "?", "{2}", "{1,2}", "{0,3}"};
    r += atom + quantifiers[pick(8)];
  }
  return r;
}

std::vector<std::string> strings_up_to(size_t length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, n = 0; n < length; ++n) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : {'a', 'b', 'c'}) out.push_back(out[i] + c);
    begin = end;
  }
  return out;  // shortest first
}

CommonString intersect(const std::string& x, const std::string& y, int64_t budget = 100'000) {
  ByteDfa a(compile_regex(x)), b(compile_regex(y));
  return shortest_common_string(a, b, budget);
}

}  // namespace

TEST(DfaIntersection, MatchesABruteForceSearchOnRandomRegexes) {
  std::mt19937 rng(20261203);
  const std::vector<std::string> candidates = strings_up_to(4);
  int found = 0, none = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const std::string x = random_regex(rng, 1), y = random_regex(rng, 1);
    const std::regex rx(x), ry(y);
    const std::string* shortest = nullptr;
    for (const std::string& s : candidates)
      if (std::regex_match(s, rx) && std::regex_match(s, ry)) {
        shortest = &s;
        break;
      }
    const CommonString ours = intersect(x, y);
    ASSERT_NE(ours.outcome, CommonString::kOverBudget) << x << " & " << y;
    if (shortest) {
      ASSERT_EQ(ours.outcome, CommonString::kFound) << x << " & " << y << " share '" << *shortest << "'";
      EXPECT_EQ(ours.text.size(), shortest->size()) << x << " & " << y;
      ++found;
    } else {
      ++none;
      if (ours.outcome == CommonString::kFound) EXPECT_GT(ours.text.size(), 4u) << x << " & " << y;
    }
    if (ours.outcome == CommonString::kFound)
      EXPECT_TRUE(std::regex_match(ours.text, rx) && std::regex_match(ours.text, ry))
          << x << " & " << y << ": '" << ours.text << "'";
  }
  // Both outcomes are exercised, or the test would prove little.
  EXPECT_GT(found, 20) << none;
  EXPECT_GT(none, 20) << found;
}

TEST(DfaIntersection, TheWitnessIsAShortestCommonString) {
  EXPECT_EQ(intersect("-?[0-9]+", "[0-9]+(?:\\.[0-9]+)?").text, "0");
  EXPECT_EQ(intersect("a*b", "a{3,}b|b{2}").text, "aaab");
  EXPECT_EQ(intersect("", "a?").outcome, CommonString::kFound);  // the empty string
  EXPECT_EQ(intersect("a+", "b+").outcome, CommonString::kNone);
}

TEST(DfaIntersection, AWalkPastTheBudgetIsReportedNotFinished) {
  // Only a 60-character string is common: the walk reaches over 50 pairs before it.
  EXPECT_EQ(intersect("a{60}", "a*", 50).outcome, CommonString::kOverBudget);
  const CommonString within = intersect("a{60}", "a*", 100);
  EXPECT_EQ(within.text, std::string(60, 'a'));
  EXPECT_EQ(within.pairs, 61);  // "", "a", ..., 60 a's
}
