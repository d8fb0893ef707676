// Host memory probes against fixture sysfs trees (tests/core/testdata/cgroup/): the same
// code that reads /sys/fs/cgroup on a node reads these, through the `root` prefix.
#include <gtest/gtest.h>

#include <string>

#include "core/memory/cgroup_reader.h"
#include "core/memory/host_memory.h"

namespace headroom::memory {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(HEADROOM_SOURCE_DIR) + "/tests/core/testdata/cgroup/" + name;
}

TEST(WorkingSetTest, SubtractsInactiveFileAndFloorsAtZero) {
  EXPECT_EQ(WorkingSetBytes(1000, 300), 700);
  EXPECT_EQ(WorkingSetBytes(100, 300), 0);
  EXPECT_EQ(WorkingSetBytes(0, 0), 0);
}

TEST(ParseTest, KeyedValuesAndLimits) {
  const std::string events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 1\n";
  EXPECT_EQ(ParseKeyedValue(events, "oom_kill"), 1);
  EXPECT_EQ(ParseKeyedValue(events, "oom"), 3);  // exact key, not a prefix
  EXPECT_EQ(ParseKeyedValue(events, "missing"), std::nullopt);
  EXPECT_EQ(ParseLimitFile("max\n", "memory.max"), 0);
  EXPECT_EQ(ParseLimitFile("2147483648\n", "memory.max"), 2147483648);
  EXPECT_EQ(ParseLimitFile("9223372036854771712\n", "memory.limit_in_bytes"), 0);  // v1 "unlimited"
  try {
    ParseLimitFile("lots", "/x/memory.max");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/memory.max"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lots"), std::string::npos) << e.what();
  }
}

TEST(FindCgroupTest, V1MemoryControllerWinsOnHybridSystems) {
  auto loc = FindProcessMemoryCgroup(Fixture("v1"));
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->version, CgroupVersion::kV1);
  EXPECT_EQ(loc->dir, Fixture("v1") + "/sys/fs/cgroup/memory/kubepods/burstable/pod1234/ctr1");
  EXPECT_EQ(loc->mount_dir, Fixture("v1") + "/sys/fs/cgroup/memory");
}

TEST(FindCgroupTest, V2UnifiedHierarchy) {
  auto loc = FindProcessMemoryCgroup(Fixture("v2"));
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->version, CgroupVersion::kV2);
  EXPECT_EQ(loc->dir, Fixture("v2") + "/sys/fs/cgroup/kubepods.slice/pod5678/ctr2");
}

TEST(FindCgroupTest, V2NamespacedContainerUsesItsMountRoot) {
  auto loc = FindProcessMemoryCgroup(Fixture("v2-namespace"));
  ASSERT_TRUE(loc.has_value());
  EXPECT_EQ(loc->version, CgroupVersion::kV2);
  EXPECT_EQ(loc->dir, Fixture("v2-namespace") + "/sys/fs/cgroup");
}

TEST(FindCgroupTest, NoCgroupFilesMeansNone) {
  EXPECT_FALSE(FindProcessMemoryCgroup(Fixture("proc-only")).has_value());
  EXPECT_FALSE(FindProcessMemoryCgroup(Fixture("does-not-exist")).has_value());
}

TEST(ReadCgroupTest, V1Counters) {
  CgroupMemory m =
      ReadCgroupMemory(Fixture("v1") + "/sys/fs/cgroup/memory/kubepods/burstable/pod1234/ctr1", CgroupVersion::kV1);
  EXPECT_EQ(m.usage_bytes, 734003200);
  EXPECT_EQ(m.inactive_file_bytes, 104857600);  // total_inactive_file, not inactive_file
  EXPECT_EQ(m.working_set_bytes, 734003200 - 104857600);
  EXPECT_EQ(m.limit_bytes, 1073741824);
  EXPECT_EQ(m.peak_bytes, 801112064);
  EXPECT_EQ(m.oom_kill_count, 2);
}

TEST(ReadCgroupTest, V2Counters) {
  CgroupMemory m = ReadCgroupMemory(Fixture("v2") + "/sys/fs/cgroup/kubepods.slice/pod5678/ctr2", CgroupVersion::kV2);
  EXPECT_EQ(m.usage_bytes, 1610612736);
  EXPECT_EQ(m.inactive_file_bytes, 209715200);
  EXPECT_EQ(m.working_set_bytes, 1610612736 - 209715200);
  EXPECT_EQ(m.limit_bytes, 2147483648);
  EXPECT_EQ(m.peak_bytes, 1800000000);
  EXPECT_EQ(m.oom_kill_count, 1);
}

TEST(ReadCgroupTest, MissingOrMalformedRequiredFileNamesIt) {
  const std::string dir = Fixture("v2-malformed") + "/sys/fs/cgroup/kubepods.slice/pod5678/ctr2";
  try {
    ReadCgroupMemory(dir, CgroupVersion::kV2);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/memory.max"), std::string::npos) << e.what();
  }
  try {
    ReadCgroupMemory(Fixture("proc-only"), CgroupVersion::kV1);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("memory.usage_in_bytes"), std::string::npos) << e.what();
  }
}

TEST(HostMemoryProbeTest, ReadsTheContainerCgroup) {
  HostMemoryProbe v1(Fixture("v1"));
  HostMemorySample s = v1.Read();
  EXPECT_EQ(s.source, "cgroup-v1");
  EXPECT_EQ(s.working_set_bytes, 734003200 - 104857600);
  EXPECT_EQ(s.limit_bytes, 1073741824);
  EXPECT_EQ(s.oom_kill_count, 2);

  HostMemoryProbe v2(Fixture("v2"));
  s = v2.Read();
  EXPECT_EQ(s.source, "cgroup-v2");
  EXPECT_EQ(s.working_set_bytes, 1610612736 - 209715200);
  EXPECT_EQ(s.limit_bytes, 2147483648);
  EXPECT_EQ(s.peak_bytes, 1800000000);

  HostMemoryProbe ns(Fixture("v2-namespace"));
  s = ns.Read();
  EXPECT_EQ(s.source, "cgroup-v2");
  EXPECT_EQ(s.working_set_bytes, 0);  // inactive file exceeds usage: floored
  EXPECT_EQ(s.limit_bytes, 536870912);
}

TEST(HostMemoryProbeTest, FallsBackToProcWhenNoLimitApplies) {
  for (const char* name : {"v1-unlimited", "v2-unlimited", "proc-only"}) {
    HostMemoryProbe probe(Fixture(name));
    HostMemorySample s = probe.Read();
    EXPECT_EQ(s.source, "proc") << name;
    EXPECT_EQ(s.working_set_bytes, 650000LL * 1024) << name;  // VmRSS
    EXPECT_EQ(s.peak_bytes, 700000LL * 1024) << name;         // VmHWM
    EXPECT_EQ(s.limit_bytes, 16384000LL * 1024) << name;      // MemTotal
  }
}

TEST(HostMemoryProbeTest, WorkingSetOnlyReadAgreesWithTheFullRead) {
  for (const char* name : {"v1", "v2", "v2-namespace", "proc-only"}) {
    HostMemoryProbe probe(Fixture(name));
    EXPECT_EQ(probe.ReadWorkingSet(), probe.Read().working_set_bytes) << name;
  }
  HostMemoryProbe live;
  const int64_t quick = live.ReadWorkingSet(), full = live.Read().working_set_bytes;
  EXPECT_NEAR(static_cast<double>(quick), static_cast<double>(full), 16.0 * (1 << 20));
}

TEST(HostMemoryProbeTest, KernelPeakResetOnlyWhenWeOwnTheV1Cgroup) {
  HostMemoryProbe v2(Fixture("v2"));
  EXPECT_FALSE(v2.ResetPeak(/*owns_cgroup=*/true));  // v2 peak reset is per-fd: not relied on
  HostMemoryProbe v1(Fixture("v1"));
  EXPECT_FALSE(v1.ResetPeak(/*owns_cgroup=*/false));  // shared with others: never reset
}

TEST(HostMemoryProbeTest, LiveReadIsSane) {
  HostMemoryProbe probe;
  HostMemorySample s = probe.Read();
  EXPECT_GT(s.working_set_bytes, 0);
  EXPECT_GT(s.limit_bytes, 0);
  EXPECT_FALSE(s.source.empty());
  EXPECT_GE(s.usage_bytes, s.working_set_bytes);
}

}  // namespace
}  // namespace headroom::memory
