// The constraint engine (src/guided) per kind: which strings a compiled constraint accepts, the
// tokens it allows at a state, refusals naming the keyword, dead ends. The vocabulary is one token
// per byte plus a few multi-byte tokens, so every string can be walked token by token.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "guided/constraint.h"
#include "guided/json_schema_regex.h"

using namespace tpbatch::guided;

namespace {

std::shared_ptr<const TokenBytes> byte_vocab() {
  auto v = std::make_shared<TokenBytes>();
  for (int b = 0; b < 256; ++b) v->bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"true", "{\"", "\":", "abc", ""}) v->bytes.push_back(t);
  v->usable.assign(v->bytes.size(), true);
  v->usable.back() = false;  // a token that writes nothing is never allowed
  return v;
}

// Whether the constraint accepts `text` whole (walked byte by byte, as tokens 0..255).
bool accepts(Constraint& c, const std::string& text) {
  int32_t s = c.start();
  for (unsigned char b : text) {
    s = c.advance(s, b);
    if (s == ByteDfa::kDead) return false;
  }
  return c.complete(s);
}

std::shared_ptr<Constraint> compile(const ConstraintSource& src) {
  static ConstraintCache cache(byte_vocab());
  return cache.get(src);
}

std::shared_ptr<Constraint> regex(const std::string& r) {
  ConstraintSource s;
  s.regex = r;
  return compile(s);
}

// Ordered: properties are written in the schema's order.
std::shared_ptr<Constraint> schema(const nlohmann::ordered_json& j, int64_t max_string = 0) {
  ConstraintSource s;
  s.json_schema = j.dump();
  s.max_string_length = max_string;
  return compile(s);
}

std::string refusal(const ConstraintSource& s) {
  try {
    compile(s);
  } catch (const GuidedError& e) {
    return e.what();
  }
  ADD_FAILURE() << "compiled";
  return "";
}

}  // namespace

TEST(GuidedConstraint, RegexAcceptsWhatFullmatchAccepts) {
  auto c = regex(R"(^(ab|cd)+[0-9]{2,3}\.?x*$)");
  for (const char* yes : {"ab12", "abcd123", "cdab99.", "ab00.xxx", "ab00x"}) EXPECT_TRUE(accepts(*c, yes)) << yes;
  for (const char* no : {"", "ab1", "ab1234", "ba12", "ab12..", "ab12y"}) EXPECT_FALSE(accepts(*c, no)) << no;
  auto cls = regex(R"([^a-c\d]\w\s[a\-z]\x41\u00e9.)");
  EXPECT_TRUE(accepts(*cls, "d_ -A\xC3\xA9\xE2\x82\xAC"));
  EXPECT_FALSE(accepts(*cls, "a_ -A\xC3\xA9x"));  // 'a' is excluded
  EXPECT_FALSE(accepts(*cls, "d_ bA\xC3\xA9x"));  // 'b' is not in [a\-z]
  EXPECT_FALSE(accepts(*cls, "d_ -A\xC3\xA9\n"));  // '.' is not a newline
}

// '.' and negated classes admit well-formed UTF-8 only, byte for byte as Unicode's table 3-7:
// a byte-fallback token cannot begin an overlong form, a surrogate or a code point past U+10FFFF.
TEST(GuidedConstraint, AnyCharacterIsWellFormedUtf8Only) {
  auto dot = regex(".");
  auto other = regex("[^a]");
  for (auto* c : {dot.get(), other.get()}) {
    for (const char* yes : {"\xC2\x80", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xF0\x90\x80\x80",
                            "\xF4\x8F\xBF\xBF", "\xEF\xBF\xBF"})
      EXPECT_TRUE(accepts(*c, yes)) << testing::PrintToString(std::string(yes));
    for (const char* no : {"\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
                           "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80"})
      EXPECT_FALSE(accepts(*c, no)) << testing::PrintToString(std::string(no));
  }
  // The first byte of a surrogate's encoding may start other characters; its second byte decides.
  const int32_t after_ed = dot->advance(dot->start(), 0xED);
  EXPECT_NE(dot->advance(after_ed, 0x9F), ByteDfa::kDead);
  EXPECT_EQ(dot->advance(after_ed, 0xA0), ByteDfa::kDead);
}

TEST(GuidedConstraint, UnsupportedRegexSyntaxIsRefusedNamingIt) {
  ConstraintSource s;
  s.regex = "(a)\\1";
  EXPECT_NE(refusal(s).find("the escape '\\1' is not supported"), std::string::npos) << refusal(s);
  s.regex = "(?=a)a";
  EXPECT_NE(refusal(s).find("only (?:...) groups"), std::string::npos);
  s.regex = "a{3,2}";
  EXPECT_NE(refusal(s).find("n < m"), std::string::npos);
}

TEST(GuidedConstraint, ChoiceAcceptsExactlyTheChoices) {
  ConstraintSource s;
  s.choice = {"yes", "no", "a.b (c)"};
  auto c = compile(s);
  for (const char* yes : {"yes", "no", "a.b (c)"}) EXPECT_TRUE(accepts(*c, yes)) << yes;
  for (const char* no : {"ye", "yesno", "aXb (c)", ""}) EXPECT_FALSE(accepts(*c, no)) << no;
}

TEST(GuidedConstraint, AllowedTokensAreThoseWhoseBytesKeepAMatchPossible) {
  ConstraintSource s;
  s.choice = {"true", "tx", "abc"};
  auto c = compile(s);
  const std::vector<int32_t> at_start = c->allowed(c->start());
  const int32_t true_token = 256, abc_token = 259;
  EXPECT_EQ(at_start, (std::vector<int32_t>{'a', 't', true_token, abc_token}));
  const int32_t after_true = c->advance(c->start(), true_token);
  EXPECT_TRUE(c->complete(after_true));
  EXPECT_TRUE(c->allowed(after_true).empty());  // only EOS: the row ends there
  EXPECT_EQ(c->advance(c->start(), 'x'), ByteDfa::kDead);
  EXPECT_EQ(c->advance(c->start(), 260), ByteDfa::kDead);  // the unusable empty token
}

TEST(GuidedConstraint, AllowedBitsAreTheAllowedIdsUpToTheLastWordWithOne) {
  auto c = regex("[a-c]+(true)?");
  int32_t state = c->start();
  for (int32_t token : {-1, int32_t('a'), 256}) {  // the start, after "a", after "atrue"
    if (token >= 0) state = c->advance(state, token);
    const std::vector<int32_t>& ids = c->allowed(state);
    const std::vector<uint64_t>& bits = c->allowed_bits(state);
    ASSERT_EQ(bits.size(), ids.empty() ? 0u : size_t(ids.back() / 64 + 1)) << token;
    std::vector<int32_t> from_bits;
    for (size_t i = 0; i < 64 * bits.size(); ++i)
      if ((bits[i / 64] >> (i % 64)) & 1u) from_bits.push_back(int32_t(i));
    EXPECT_EQ(from_bits, ids) << token;
  }
  EXPECT_TRUE(c->allowed_bits(state).empty());  // "atrue": a whole match, only EOS may follow
}

TEST(GuidedConstraint, JsonSchemaOutputsValidateAndOthersDoNot) {
  const nlohmann::ordered_json sch = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"maxLength", 3}}},
        {"age", {{"type", "integer"}, {"minimum", 0}}},
        {"tags", {{"type", "array"}, {"items", {{"enum", {"a", 1, nullptr}}}}, {"maxItems", 2}}},
        {"ok", {{"anyOf", {{{"type", "boolean"}}, {{"type", "null"}}}}}},
        {"ref", {{"$ref", "#/$defs/pt"}}}}},
      {"required", {"name"}},
      {"$defs", {{"pt", {{"type", "object"}, {"properties", {{"x", {{"type", "number"}}}}}}}}}};
  auto c = schema(sch);
  EXPECT_TRUE(accepts(*c, R"({"name":"Bo","age":42,"tags":["a",null],"ok":true,"ref":{"x":-1.5e3}})"));
  EXPECT_TRUE(accepts(*c, R"({"name":"","age":0,"tags":[],"ok":null,"ref":{"x":0}})"));
  EXPECT_FALSE(accepts(*c, R"({"name":"Bobby","age":42,"tags":[],"ok":true,"ref":{"x":1}})"));  // maxLength
  EXPECT_FALSE(accepts(*c, R"({"name":"Bo","age":-1,"tags":[],"ok":true,"ref":{"x":1}})"));     // minimum
  EXPECT_FALSE(accepts(*c, R"({"name":"Bo","age":1,"tags":[1,1,1],"ok":true,"ref":{"x":1}})"));  // maxItems
  EXPECT_FALSE(accepts(*c, R"({"name":"Bo","age":01,"tags":[],"ok":true,"ref":{"x":1}})"));     // JSON number
}

TEST(GuidedConstraint, StringsWithoutMaxLengthAreBoundedWhenAsked) {
  auto c = schema({{"type", "string"}}, 4);
  EXPECT_TRUE(accepts(*c, R"("abcd")"));
  EXPECT_TRUE(accepts(*c, R"("a\"\u00e9")"));
  EXPECT_FALSE(accepts(*c, R"("abcde")"));
  EXPECT_FALSE(accepts(*c, "\"a\nb\""));  // control characters must be escaped
}

TEST(GuidedConstraint, FormatsBecomeTheirPatterns) {
  auto c = schema({{"type", "string"}, {"format", "date-time"}});
  EXPECT_TRUE(accepts(*c, R"("2024-02-29T23:59:01Z")"));
  EXPECT_TRUE(accepts(*c, R"("2024-12-01T00:00:00.123+05:30")"));
  EXPECT_FALSE(accepts(*c, R"("2024-13-01T00:00:00Z")"));
  auto u = schema({{"type", "string"}, {"format", "uuid"}});
  EXPECT_TRUE(accepts(*u, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(*u, R"("123e4567")"));
}

TEST(GuidedConstraint, JsonObjectAcceptsNestedObjects) {
  ConstraintSource s;
  s.json_object = true;
  auto c = compile(s);
  EXPECT_TRUE(accepts(*c, R"({})"));
  EXPECT_TRUE(accepts(*c, R"({"a":[1,{"b":null}],"c":"d","e":-0.5})"));
  EXPECT_FALSE(accepts(*c, R"([1])"));
  EXPECT_FALSE(accepts(*c, R"({"a":1,})"));
}

TEST(GuidedConstraint, UnsupportedSchemaKeywordsAreRefusedNamingTheKeywordAndWhere) {
  ConstraintSource s;
  s.json_schema = R"({"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}})";
  EXPECT_EQ(refusal(s), "guided_json: JSON Schema keyword 'not' at #/properties/a is not supported");
  s.json_schema = R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})";
  EXPECT_EQ(refusal(s), "guided_json: JSON Schema keyword 'uniqueItems' at # is not supported");
  s.json_schema = R"({"properties":{"n":{"type":"integer","minimum":5}}})";
  EXPECT_NE(refusal(s).find("keyword 'minimum' at #/properties/n"), std::string::npos) << refusal(s);
  s.json_schema = R"({"$defs":{"t":{"type":"object","properties":{"k":{"$ref":"#/$defs/t"}}}},"$ref":"#/$defs/t"})";
  EXPECT_NE(refusal(s).find("'$ref'"), std::string::npos);
  EXPECT_NE(refusal(s).find("recursive"), std::string::npos);
  s.json_schema = "{";
  EXPECT_NE(refusal(s).find("guided_json: the JSON Schema is not valid JSON"), std::string::npos);
}

TEST(GuidedConstraint, RefsThatMultiplyASchemaAreRefusedNotExpandedForever) {
  nlohmann::json defs = {{"d0", {{"type", "integer"}}}};
  for (int i = 1; i <= 40; ++i) {
    const std::string prev = "#/$defs/d" + std::to_string(i - 1);
    defs["d" + std::to_string(i)] = {{"type", "array"}, {"items", {{"anyOf", {{{"$ref", prev}}, {{"$ref", prev}}}}}}};
  }
  ConstraintSource s;
  s.json_schema = nlohmann::json{{"$defs", defs}, {"$ref", "#/$defs/d40"}}.dump();
  EXPECT_NE(refusal(s).find("expands the schema past"), std::string::npos) << refusal(s);
}

TEST(GuidedConstraint, GrammarIsRefusedNamingTheKey) {
  ConstraintSource s;
  s.grammar = "root ::= \"a\"";
  EXPECT_EQ(refusal(s).rfind("guided_grammar: grammars are not supported", 0), 0u) << refusal(s);
  EXPECT_NE(constraint_problem(s), "");
}

TEST(GuidedConstraint, SameContentSharesOneCompiledConstraint) {
  EXPECT_EQ(regex("x[0-9]+").get(), regex("x[0-9]+").get());
  EXPECT_NE(regex("x[0-9]+").get(), regex("x[0-9]*").get());
}

TEST(GuidedConstraint, TwoKindsAtOnceAreRefused) {
  ConstraintSource s;
  s.regex = "a";
  s.choice = {"a"};
  EXPECT_NE(refusal(s).find("set one of"), std::string::npos);
}

TEST(GuidedConstraint, OneOfWithBranchesNoOutputMatchesTwiceIsTheirAlternatives) {
  auto c = schema({{"oneOf", {{{"type", "string"}}, {{"type", "integer"}}}}});
  for (const char* yes : {R"("a")", "12", "-3"}) EXPECT_TRUE(accepts(*c, yes)) << yes;
  for (const char* no : {"1.5", "true"}) EXPECT_FALSE(accepts(*c, no)) << no;
  // Objects told apart by a required property's const (a discriminator).
  const nlohmann::ordered_json cat = {{"type", "object"},
                                      {"properties", {{"kind", {{"const", "cat"}}}, {"lives", {{"type", "integer"}}}}},
                                      {"required", {"kind"}}};
  const nlohmann::ordered_json dog = {{"type", "object"},
                                      {"properties", {{"kind", {{"const", "dog"}}}, {"good", {{"type", "boolean"}}}}},
                                      {"required", {"kind"}}};
  auto pets = schema({{"oneOf", {cat, dog}}});
  for (const char* yes : {R"({"kind":"cat","lives":9})", R"({"kind":"dog"})", R"({"kind":"dog","good":true})"})
    EXPECT_TRUE(accepts(*pets, yes)) << yes;
  for (const char* no : {R"({"kind":"cat","good":true})", R"({})", R"({"kind":"cow"})"})
    EXPECT_FALSE(accepts(*pets, no)) << no;
}

TEST(GuidedConstraint, OneOfWithBranchesSharingAnOutputIsRefusedNamingAShortestOne) {
  ConstraintSource s;
  s.json_schema = R"({"type":"object","properties":{"x":{"oneOf":[{"type":"integer"},{"type":"string"},{"type":"number"}]}}})";
  EXPECT_EQ(refusal(s), "guided_json: oneOf at #/properties/x: branches 0 and 2 both admit \"0\" (oneOf needs "
                        "branches no value matches twice; use anyOf if that is meant)");
  // Two objects with nothing required share {}.
  s.json_schema = R"({"oneOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{"type":"string"}}}]})";
  EXPECT_NE(refusal(s).find("oneOf at #: branches 0 and 1 both admit \"{}\""), std::string::npos) << refusal(s);
  s.json_schema = R"({"oneOf":[{"type":"string","maxLength":2},{"type":"string","pattern":"[a-z]+"}]})";
  EXPECT_NE(refusal(s).find("both admit \"\\\"a\\\"\""), std::string::npos) << refusal(s);
  // The same branches as anyOf are what the schema means then.
  s.json_schema = R"({"anyOf":[{"type":"integer"},{"type":"number"}]})";
  EXPECT_TRUE(accepts(*compile(s), "1.5"));
}

// JSON Schema reads 1.0 and 1 as one number: a const or enum number with an integral value is
// written as an integer, so two branches holding it as 1.0 and as 1 are seen to share it.
TEST(GuidedConstraint, ConstNumbersWithIntegralValuesAreWrittenAsIntegers) {
  auto c = schema({{"properties", {{"v", {{"const", 1.0}}}, {"w", {{"enum", {2.0, -0.0, 2.5, "x"}}}}}},
                   {"required", {"v", "w"}}});
  for (const char* yes : {R"({"v":1,"w":2})", R"({"v":1,"w":0})", R"({"v":1,"w":2.5})", R"({"v":1,"w":"x"})"})
    EXPECT_TRUE(accepts(*c, yes)) << yes;
  for (const char* no : {R"({"v":1.0,"w":2})", R"({"v":1,"w":2.0})", R"({"v":1,"w":-0.0})"})
    EXPECT_FALSE(accepts(*c, no)) << no;
  ConstraintSource s;
  s.json_schema = R"({"oneOf":[{"const":1.0},{"const":1}]})";
  EXPECT_NE(refusal(s).find("branches 0 and 1 both admit \"1\""), std::string::npos) << refusal(s);
  s.json_schema = R"({"oneOf":[{"enum":[[1.0,"a"]]},{"const":[1,"a"]}]})";
  EXPECT_NE(refusal(s).find("branches 0 and 1 both admit"), std::string::npos) << refusal(s);
}

TEST(GuidedConstraint, OneOfBranchesTooLargeToTellApartAreRefusedNamingWhere) {
  ConstraintSource bounds;
  // Disjoint, but only their last character tells them apart: the walk visits about 30 pairs.
  const std::string sch = R"({"properties":{"id":{"oneOf":[{"type":"string","pattern":"[a-z]{0,30}0"},)"
                          R"({"type":"string","pattern":"[a-z]{0,30}1"}]}},"required":["id"]})";
  EXPECT_NO_THROW(json_schema_regex(sch, bounds));
  try {
    json_schema_regex(sch, bounds, 3);
    ADD_FAILURE() << "compiled";
  } catch (const GuidedError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("oneOf at #/properties/id: branches 0 and 1 are too large to tell apart "
                                          "(over 3 automaton state pairs", 0), 0u) << e.what();
  }
  // The budget is the oneOf's: each pair of three branches fits 50 pairs, all three pairs do not.
  const std::string three = R"({"oneOf":[{"type":"string","pattern":"[a-z]{0,30}0"},{"type":"string","pattern":"[a-z]{0,30}1"},)"
                            R"({"type":"string","pattern":"[a-z]{0,30}2"}]})";
  EXPECT_NO_THROW(json_schema_regex(sch, bounds, 50));
  EXPECT_NO_THROW(json_schema_regex(three, bounds, 200));
  try {
    json_schema_regex(three, bounds, 50);
    ADD_FAILURE() << "compiled";
  } catch (const GuidedError& e) {
    EXPECT_NE(std::string(e.what()).find("are too large to tell apart"), std::string::npos) << e.what();
  }
}

// Every order and subset of three properties, with bad commas: accepted exactly when the members
// present are in the schema's order, include every required one and are comma-separated.
TEST(GuidedConstraint, PropertiesNotRequiredMayBeLeftOutAndThoseWrittenKeepTheSchemasOrder) {
  const std::vector<std::pair<std::string, std::string>> members = {{"a", "1"}, {"b", R"("x")"}, {"c", "true"}};
  for (const std::set<std::string>& required : std::vector<std::set<std::string>>{{}, {"b"}, {"a", "c"}, {"a", "b", "c"}}) {
    nlohmann::ordered_json sch = {{"type", "object"},
                                  {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}}}, {"c", {{"type", "boolean"}}}}}};
    if (!required.empty()) sch["required"] = required;
    auto c = schema(sch);
    // Every sequence of distinct members (any order, any subset), written three ways.
    std::set<std::vector<int>> sequences = {{}};
    for (size_t len = 1; len <= 3; ++len)
      for (int mask = 0; mask < 27; ++mask) {
        std::vector<int> seq = {mask % 3, mask / 3 % 3, mask / 9};
        seq.resize(len);
        if (std::set<int>(seq.begin(), seq.end()).size() == len) sequences.insert(seq);
      }
    ASSERT_EQ(sequences.size(), 16u);  // 1 + 3 + 6 + 6
    int valid = 0;
    for (const std::vector<int>& seq : sequences) {
      std::string body;
      std::set<std::string> present;
      for (int m : seq) {
        body += (body.empty() ? "" : ",") + ("\"" + members[m].first + "\":" + members[m].second);
        present.insert(members[m].first);
      }
      const bool in_order = std::is_sorted(seq.begin(), seq.end());
      const bool complete = std::includes(present.begin(), present.end(), required.begin(), required.end());
      EXPECT_EQ(accepts(*c, "{" + body + "}"), in_order && complete) << "{" << body << "}";
      valid += in_order && complete;
      EXPECT_FALSE(accepts(*c, "{," + body + "}")) << body;
      EXPECT_FALSE(accepts(*c, "{" + body + ",}")) << body;
      if (seq.size() >= 2) {
        std::string doubled = body;
        doubled.insert(doubled.find(",\""), ",");
        EXPECT_FALSE(accepts(*c, "{" + doubled + "}")) << doubled;
      }
    }
    EXPECT_EQ(valid, 1 << (3 - required.size()));  // the subsets of the optional ones
  }
}

TEST(GuidedConstraint, RequiredNamesOnlyPropertiesTheSchemaLists) {
  ConstraintSource s;
  s.json_schema = R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a","z"]})";
  EXPECT_EQ(refusal(s), "guided_json: JSON Schema keyword 'required' at # names 'z', which is not in properties");
  s.json_schema = R"({"type":"object","properties":{"p":{"type":"object","required":["q"]}}})";
  EXPECT_EQ(refusal(s), "guided_json: JSON Schema keyword 'required' at #/properties/p needs the properties it names in properties");
  auto empty = schema({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}});
  EXPECT_TRUE(accepts(*empty, "{}"));
}

// JSON Schema lets an object hold properties its schema does not list: an object one branch writes
// may match another branch whose text it is not. Checked against what Python's jsonschema says
// of the shared values named in the comments.
TEST(GuidedConstraint, OneOfObjectsMustBeToldApartByARequiredProperty) {
  ConstraintSource s;
  // {"a":0} is written by branch 0 only, but matches branch 1 too (b is optional, a allowed).
  s.json_schema = R"({"oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"integer"}}}]})";
  EXPECT_NE(refusal(s).find("oneOf at #: branches 0 and 1 may both match one value"), std::string::npos) << refusal(s);
  // Each requires a property the other never writes.
  s.json_schema = R"({"oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]})";
  EXPECT_TRUE(accepts(*compile(s), R"({"b":1})"));
  // Branch 1 allows no property but b, and branch 0 always writes a.
  s.json_schema = R"({"oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"additionalProperties":false}]})";
  EXPECT_TRUE(accepts(*compile(s), "{}"));
  // A discriminator one level down, through $refs; then made optional in one branch.
  const std::string defs = R"("$defs":{"one":{"properties":{"t":{"const":1}},"required":["t"]},"two":{"properties":{"t":{"const":2}},"required":["t"]},)"
                           R"("loose":{"properties":{"t":{"const":2}}}})";
  s.json_schema = R"({)" + defs + R"(,"oneOf":[{"properties":{"x":{"$ref":"#/$defs/one"}},"required":["x"]},)"
                  R"({"properties":{"x":{"$ref":"#/$defs/two"}},"required":["x"]}]})";
  EXPECT_TRUE(accepts(*compile(s), R"({"x":{"t":2}})"));
  s.json_schema = R"({)" + defs + R"(,"oneOf":[{"properties":{"x":{"$ref":"#/$defs/one"}},"required":["x"]},)"
                  R"({"properties":{"x":{"$ref":"#/$defs/loose"}},"required":["x"]}]})";  // {"x":{"t":1}} matches both
  EXPECT_NE(refusal(s).find("branches 0 and 1 may both match one value"), std::string::npos) << refusal(s);
  // Objects inside arrays and anyOf branches are read as values too.
  const std::string item_a = R"({"properties":{"a":{"type":"integer"}},"required":["a"]})";
  const std::string item_b = R"({"properties":{"b":{"type":"integer"}},"required":["b"]})";
  const std::string loose_b = R"({"properties":{"b":{"type":"integer"}}})";
  s.json_schema = R"({"oneOf":[{"type":"array","minItems":1,"items":)" + item_a + R"(},{"type":"array","minItems":1,"items":)" +
                  loose_b + "}]}";  // [{"a":0}] matches both
  EXPECT_NE(refusal(s).find("branches 0 and 1 may both match one value"), std::string::npos) << refusal(s);
  s.json_schema = R"({"oneOf":[{"type":"array","minItems":1,"items":)" + item_a + R"(},{"type":"array","minItems":1,"items":)" +
                  item_b + "}]}";
  EXPECT_TRUE(accepts(*compile(s), R"([{"b":1},{"b":2}])"));
  s.json_schema = R"({"oneOf":[{"anyOf":[)" + item_a + R"(,{"properties":{"c":{"type":"integer"}},"required":["c"]}]},)" +
                  loose_b + "]}";  // {"a":0} matches both
  EXPECT_NE(refusal(s).find("branches 0 and 1 may both match one value"), std::string::npos) << refusal(s);
  s.json_schema = R"({"oneOf":[{"anyOf":[)" + item_a + R"(,{"properties":{"c":{"type":"integer"}},"required":["c"]}]},)" +
                  item_b + "]}";
  EXPECT_TRUE(accepts(*compile(s), R"({"c":3})"));
  s.json_schema = R"({"oneOf":[{"type":"array","items":)" + item_a + R"(},{"type":"string"}]})";  // arrays are never strings
  EXPECT_TRUE(accepts(*compile(s), R"("x")"));
  // A branch matching anything overlaps every other, even where its text (bounded strings) does not.
  s.json_schema = R"({"oneOf":[{"type":"string","minLength":20},{"description":"anything"}]})";
  s.max_string_length = 10;
  EXPECT_NE(refusal(s).find("branches 0 and 1 may both match one value"), std::string::npos) << refusal(s);
}
