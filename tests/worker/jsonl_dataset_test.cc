// JsonlDataset on real files (good, and each way a file can be wrong), the filter, the
// content hash, and DatasetOrder's epochs: permutations, deterministic, seed- and
// epoch-dependent, the same whoever asks.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "tests/helpers/temp_dir.h"
#include "worker/tasks/jsonl_dataset.h"

namespace headroom::worker {
namespace {

class JsonlDatasetTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& content, const std::string& name = "data.jsonl") {
    const std::string path = (std::filesystem::path(dir_.path()) / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  // The message of the DatasetError Load throws (and its line), or "" when it loads.
  std::string LoadError(const std::string& content, int64_t* line = nullptr, const std::string& prompt_key = "question",
                        const std::string& answer_key = "answer") {
    const std::string path = Write(content);
    try {
      JsonlDataset::Load(path, prompt_key, answer_key);
    } catch (const DatasetError& e) {
      EXPECT_EQ(e.file(), path);
      if (line) *line = e.line();
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ":", 0), 0u) << what;
      return what.substr(path.size() + 1);
    }
    return "";
  }
  testing::TempDir dir_{"headroom-jsonl"};
};

TEST_F(JsonlDatasetTest, LoadsRecordsWithTheirLines) {
  const std::string path =
      Write("\xEF\xBB\xBF{\"question\": \"Natalia sold 48 clips...\", \"answer\": \"48/2 = 24\\n#### 72\", \"id\": 1}\n"
            "\n"
            "   \t\n"
            "{\"answer\": 7, \"question\": \"3+4?\"}\r\n"
            "{\"question\": \"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00\", \"answer\": 2.5}");
  JsonlDataset d = JsonlDataset::Load(path, "question", "answer");
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d[0].prompt, "Natalia sold 48 clips...");
  EXPECT_EQ(d[0].answer, "48/2 = 24\n#### 72");
  EXPECT_EQ(d[0].line, 1);
  EXPECT_EQ(d[1].prompt, "3+4?");
  EXPECT_EQ(d[1].answer, "7") << "a number becomes its text";
  EXPECT_EQ(d[1].line, 4);
  EXPECT_EQ(d[2].prompt, "caf\xc3\xa9 \xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(d[2].answer, "2.5");
  EXPECT_EQ(d[2].line, 5);
  EXPECT_EQ(d.path(), path);
  EXPECT_THROW(d[3], std::out_of_range);

  // Other keys.
  const std::string math = Write("{\"problem\": \"1/2+1/2\", \"solution\": \"\\\\boxed{1}\"}\n", "math.jsonl");
  JsonlDataset m = JsonlDataset::Load(math, "problem", "solution");
  ASSERT_EQ(m.size(), 1);
  EXPECT_EQ(m[0].answer, "\\boxed{1}");
}

TEST_F(JsonlDatasetTest, EachProblemNamesFileLineAndKey) {
  int64_t line = -1;
  EXPECT_EQ(LoadError("", &line), " no records (the file is empty or blank)");
  EXPECT_EQ(line, 0);
  EXPECT_EQ(LoadError("\n \n\n"), " no records (the file is empty or blank)");

  EXPECT_EQ(LoadError("{\"question\": \"q\", \"answer\": \"a\"}\n\n{\"question\": \"q\", \"answer\": }\n", &line),
            "3: invalid JSON (column 29: syntax error while parsing value - unexpected '}'; expected '[', '{', or a "
            "literal)");
  EXPECT_EQ(line, 3);
  EXPECT_NE(LoadError("{\"question\": \"q\", \"answer\": \"a\"} trailing\n").find("1: invalid JSON"),
            std::string::npos);

  EXPECT_EQ(LoadError("[1, 2]\n", &line), "1: expected a JSON object per line, got array");
  EXPECT_EQ(LoadError("\"just a string\"\n"), "1: expected a JSON object per line, got string");

  EXPECT_EQ(LoadError("{\"question\": \"q\", \"answer\": \"a\"}\n{\"problem\": \"q\", \"solution\": \"a\"}\n", &line),
            "2: no key \"question\" (the prompt key); the record has keys \"problem\", \"solution\"");
  EXPECT_EQ(line, 2);
  EXPECT_EQ(LoadError("{\"question\": \"q\"}\n"),
            "1: no key \"answer\" (the answer key); the record has keys \"question\"");
  EXPECT_EQ(LoadError("{}\n"), "1: no key \"question\" (the prompt key); the record has no keys");

  EXPECT_EQ(LoadError("{\"question\": null, \"answer\": \"a\"}\n"),
            "1: key \"question\" (the prompt key) holds null; expected a string or a number");
  EXPECT_EQ(LoadError("{\"question\": \"q\", \"answer\": [\"a\"]}\n"),
            "1: key \"answer\" (the answer key) holds array; expected a string or a number");
  EXPECT_EQ(LoadError("{\"question\": true, \"answer\": \"a\"}\n"),
            "1: key \"question\" (the prompt key) holds boolean; expected a string or a number");

  // Unreadable paths.
  try {
    JsonlDataset::Load(dir_.path() + "/absent.jsonl", "question", "answer");
    ADD_FAILURE() << "loaded a missing file";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), dir_.path() + "/absent.jsonl: cannot read: No such file or directory");
  }
  try {
    JsonlDataset::Load(dir_.path(), "question", "answer");
    ADD_FAILURE() << "loaded a directory";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), dir_.path() + ": is a directory, expected a .jsonl file");
  }
}

TEST_F(JsonlDatasetTest, ALineAboveTheLimitIsRefusedNamingFileAndLine) {
  const std::string record = "{\"question\": \"1+1?\", \"answer\": \"2\"}";
  const std::string path = Write(record + "\n" + record + "\n" + record + " \n");
  EXPECT_EQ(JsonlDataset::Load(path, "question", "answer", record.size() + 1).size(), 3);
  try {
    JsonlDataset::Load(path, "question", "answer", record.size());
    ADD_FAILURE() << "a line one byte over the limit loaded";
  } catch (const DatasetError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(std::string(e.what()), path + ":3: the line is longer than " + std::to_string(record.size()) +
                                         " bytes (the limit for one line, one record)");
  }
}

// Five good records, then 1 GB of NUL bytes without a line end (a sparse file: nothing is
// written to disk). std::getline would read the gigabyte into one string and the parser
// take twice that again; the line is refused after reading about the limit of it.
TEST_F(JsonlDatasetTest, AGigabyteOfNulBytesIsRefusedAtLineSixWithinBoundedMemory) {
  std::string content;
  for (int i = 0; i < 5; ++i) content += "{\"question\": \"q\", \"answer\": \"a\"}\n";
  const std::string path = Write(content);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(content.size()) + (off_t{1} << 30)), 0);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  try {
    JsonlDataset::Load(path, "question", "answer");
    ADD_FAILURE() << "loaded 1 GB of NUL bytes";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":6: the line is longer than 4 MiB (the limit for one line, one record)");
  }
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  // The peak may rise by the 4 MiB line (twice, while its string grows): far below 1 GB.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB more at peak";
}

TEST_F(JsonlDatasetTest, AFifoIsRefusedNotWaitedOn) {
  const std::string fifo = dir_.path() + "/fifo.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    JsonlDataset::Load(fifo, "question", "answer");
    ADD_FAILURE() << "loaded a FIFO";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": is a FIFO, expected a .jsonl file");
  }
}

TEST_F(JsonlDatasetTest, FilterKeepsOrderAndRefusesToEmptyTheDataset) {
  std::string content;
  for (int i = 0; i < 10; ++i) {
    content += "{\"question\": \"" + std::string(static_cast<size_t>(i), 'x') + "\", \"answer\": \"" +
               std::to_string(i) + "\"}\n";
  }
  JsonlDataset d = JsonlDataset::Load(Write(content), "question", "answer");
  const uint64_t all_hash = d.content_hash();
  EXPECT_EQ(d.Filter([](const DatasetRecord& r) { return r.prompt.size() % 3 == 0; }), 6);
  ASSERT_EQ(d.size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i].answer, std::to_string(3 * i));
    EXPECT_EQ(d[i].line, 3 * i + 1);
  }
  EXPECT_NE(d.content_hash(), all_hash) << "the hash is of the kept records";
  EXPECT_EQ(d.Filter([](const DatasetRecord&) { return true; }), 0);
  try {
    d.Filter([](const DatasetRecord&) { return false; }, "maxPromptLength (16 tokens)");
    ADD_FAILURE() << "emptied the dataset";
  } catch (const DatasetError& e) {
    EXPECT_EQ(std::string(e.what()), d.path() + ": no records left: all 4 were dropped by maxPromptLength (16 tokens)");
  }
  EXPECT_EQ(d.size(), 4) << "a refused filter leaves the records";
}

TEST_F(JsonlDatasetTest, ContentHashFollowsTheRecordsOnly) {
  auto hash = [&](const std::string& content, const std::string& name) {
    return JsonlDataset::Load(Write(content, name), "q", "a").content_hash();
  };
  const uint64_t base = hash("{\"q\": \"1+1\", \"a\": \"2\"}\n{\"q\": \"2+2\", \"a\": \"4\"}\n", "a.jsonl");
  // Same records: other file, blank lines, key order, other keys, spacing.
  EXPECT_EQ(hash("\n{\"a\": \"2\", \"q\": \"1+1\", \"id\": 9}\n\n{ \"q\" : \"2+2\" , \"a\" : \"4\" }\n", "b.jsonl"),
            base);
  // Different records.
  EXPECT_NE(hash("{\"q\": \"2+2\", \"a\": \"4\"}\n{\"q\": \"1+1\", \"a\": \"2\"}\n", "c.jsonl"), base) << "order";
  EXPECT_NE(hash("{\"q\": \"1+1\", \"a\": \"3\"}\n{\"q\": \"2+2\", \"a\": \"4\"}\n", "d.jsonl"), base) << "an answer";
  EXPECT_NE(hash("{\"q\": \"1+1\", \"a\": \"2\"}\n", "e.jsonl"), base) << "a record fewer";
  // Field boundaries count: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(hash("{\"q\": \"ab\", \"a\": \"c\"}\n", "f.jsonl"), hash("{\"q\": \"a\", \"a\": \"bc\"}\n", "g.jsonl"));
}

TEST(DatasetOrder, EachEpochIsAPermutation) {
  for (int64_t size : {1, 2, 7, 1000}) {
    DatasetOrder order(size, 42);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      for (int64_t i = 0; i < size; ++i) {
        const uint64_t g = static_cast<uint64_t>(epoch * size + i);
        EXPECT_EQ(order.Epoch(g), epoch);
        EXPECT_EQ(order.Cursor(g), i);
        seen.push_back(order.RecordAt(g));
      }
      EXPECT_EQ(seen, order.Permutation(epoch));
      std::sort(seen.begin(), seen.end());
      for (int64_t i = 0; i < size; ++i)
        ASSERT_EQ(seen[static_cast<size_t>(i)], i) << "size " << size << " epoch " << epoch;
    }
  }
  EXPECT_THROW(DatasetOrder(0, 1), std::invalid_argument);
}

TEST(DatasetOrder, DependsOnSeedAndEpochOnly) {
  const int64_t n = 500;
  DatasetOrder a(n, 7), b(n, 7), other_seed(n, 8);
  EXPECT_EQ(a.Permutation(0), b.Permutation(0));
  EXPECT_NE(a.Permutation(0), other_seed.Permutation(0));
  EXPECT_NE(a.Permutation(0), a.Permutation(1));
  std::vector<int64_t> identity(n);
  for (int64_t i = 0; i < n; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(a.Permutation(0), identity) << "shuffled";

  // Asked in any order (a resumed run, another rank), the answers are the same.
  std::vector<uint64_t> indices = {1499, 3, 999, 0, 500, 1000, 2, 1498, 7};
  for (uint64_t g : indices) EXPECT_EQ(a.RecordAt(g), b.Permutation(b.Epoch(g))[static_cast<size_t>(b.Cursor(g))]);
  // Far epochs need no earlier ones.
  const uint64_t far = uint64_t{1} << 40;
  EXPECT_EQ(a.RecordAt(far), DatasetOrder(n, 7).Permutation(static_cast<int64_t>(far / n))[far % n]);

  DatasetOrder copy = a;
  EXPECT_EQ(copy.RecordAt(1234), a.RecordAt(1234));
  copy = other_seed;
  EXPECT_EQ(copy.RecordAt(1234), other_seed.RecordAt(1234));
}

TEST(DatasetOrder, EveryRecordIsAboutEquallyLikelyFirst) {
  // Fisher-Yates with an unbiased source puts each record first with probability 1/n.
  const int64_t n = 8;
  const int epochs = 8000;
  DatasetOrder order(n, 3);
  std::vector<int> first(n, 0);
  for (int e = 0; e < epochs; ++e) ++first[static_cast<size_t>(order.RecordAt(static_cast<uint64_t>(e) * n))];
  for (int64_t i = 0; i < n; ++i) {
    // Expected 1000 each; 5 standard deviations is +-148.
    EXPECT_NEAR(first[static_cast<size_t>(i)], epochs / n, 150) << "record " << i;
  }
}

TEST(DatasetOrder, ThreadsShareOneOrder) {
  DatasetOrder order(300, 11);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t g = 0; g < 3000; ++g)
        got[static_cast<size_t>(t)].push_back(order.RecordAt((g * 7 + t * 301) % 3000));
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    for (uint64_t g = 0; g < 3000; g += 97) {
      const uint64_t index = (g * 7 + t * 301) % 3000;
      EXPECT_EQ(got[static_cast<size_t>(t)][g], DatasetOrder(300, 11).RecordAt(index));
    }
  }
}

}  // namespace
}  // namespace headroom::worker
