// Shards of a job: the INDEX/COUNT and Slurm array forms, the lines of each shard, the file names.
#include "job/shard.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace tpbatch {
namespace {

using Env = std::map<std::string, std::string>;

// The message of a shard that must be refused with exit 2.
std::string refusal(const std::string& text, const Env& env = {}) {
  try {
    parse_shard(text, "--shard", env);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "'" << text << "' was accepted";
  return "";
}

TEST(ParseShard, NothingIsTheWholeJob) {
  const Shard s = parse_shard("", "--shard", {});
  EXPECT_FALSE(s.sharded());
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.count, 1);
}

TEST(ParseShard, IndexOverCountCountsFromZero) {
  const Shard s = parse_shard("15/16", "--shard", {});
  EXPECT_EQ(s.index, 15);
  EXPECT_EQ(s.count, 16);
  EXPECT_TRUE(s.sharded());
}

TEST(ParseShard, MalformedOrOutOfRangeValuesNameTheFlagAndValue) {
  EXPECT_NE(refusal("16/16").find("--shard '16/16': shard index 16 is not below the count 16"), std::string::npos);
  EXPECT_NE(refusal("0/0").find("--shard '0/0': the shard count must be at least 1"), std::string::npos);
  for (const char* bad : {"3", "3/", "/4", "-1/4", "+1/4", "1/4/2", "a/b", " 1/4", "1/4 ", "1.0/4", "auto"})
    EXPECT_NE(refusal(bad).find(std::string("--shard '") + bad + "' is not a shard"), std::string::npos) << bad;
}

TEST(ParseShard, SlurmTakesTheArrayTaskFromItsFirstId) {
  const Env env = {{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_MIN", "4"}, {"SLURM_ARRAY_TASK_MAX", "19"},
                   {"SLURM_ARRAY_TASK_COUNT", "16"}};
  const Shard s = parse_shard("slurm", "--shard", env);
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 16);
}

TEST(ParseShard, SlurmArraysWithAStepGiveConsecutiveShards) {
  const Env env = {{"SLURM_ARRAY_TASK_ID", "6"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_MAX", "30"},
                   {"SLURM_ARRAY_TASK_COUNT", "16"}, {"SLURM_ARRAY_TASK_STEP", "2"}};
  const Shard s = parse_shard("slurm", "--shard", env);
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 16);
}

TEST(ParseShard, SlurmOutsideAnArrayJobIsRefused) {
  EXPECT_NE(refusal("slurm").find("SLURM_ARRAY_TASK_ID is not set"), std::string::npos);
  EXPECT_NE(refusal("slurm", {{"SLURM_ARRAY_TASK_ID", "2"}}).find("SLURM_ARRAY_TASK_MIN or SLURM_ARRAY_TASK_COUNT"),
            std::string::npos);
}

TEST(ParseShard, SlurmArraysOfScatteredIdsAreRefused) {  // --array=1,5,7
  const Env env = {{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_MAX", "7"},
                   {"SLURM_ARRAY_TASK_COUNT", "3"}};
  EXPECT_NE(refusal("slurm", env).find("are not one evenly stepped range"), std::string::npos);
}

TEST(LinesOfShard, TheShardsCoverEveryLineOnceInOrder) {
  for (int64_t lines : {0, 1, 5, 42, 1000003})
    for (int64_t count : {1, 2, 3, 4, 16, 7919}) {
      int64_t next = 0;
      for (int64_t i = 0; i < count; ++i) {
        const IndexRange r = lines_of_shard(Shard{i, count}, lines);
        EXPECT_EQ(r.begin, next) << lines << " lines, shard " << i << " of " << count;
        EXPECT_LE(r.end - r.begin, lines / count + 1);
        EXPECT_GE(r.end - r.begin, lines / count);
        next = r.end;
      }
      EXPECT_EQ(next, lines) << lines << " lines, " << count << " shards";
    }
}

TEST(ShardOutputPath, TheLabelGoesBeforeTheExtension) {
  EXPECT_EQ(shard_output_path("out/results.h5", Shard{3, 16}), "out/results.shard-0003-of-0016.h5");
  EXPECT_EQ(shard_output_path("results", Shard{0, 2}), "results.shard-0000-of-0002");
  EXPECT_EQ(shard_output_path("a.b/results", Shard{1, 2}), "a.b/results.shard-0001-of-0002");
  EXPECT_EQ(shard_output_path("r.h5", Shard{12345, 100000}), "r.shard-012345-of-100000.h5");
}

TEST(ShardOutputPath, APlaceholderTakesTheLabel) {
  EXPECT_EQ(shard_output_path("out/{shard}/results.h5", Shard{3, 16}), "out/0003-of-0016/results.h5");
}

TEST(ShardOutputPath, TheWholeJobKeepsItsPathAndRefusesAPlaceholder) {
  EXPECT_EQ(shard_output_path("results.h5", Shard{}), "results.h5");
  EXPECT_THROW(shard_output_path("results-{shard}.h5", Shard{}), Error);
}

}  // namespace
}  // namespace tpbatch
