#include "parallel/placement.h"

#include <gtest/gtest.h>

#include <iostream>

#include "core/errors.h"
#include "model/shard_plan.h"

namespace qmpi {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.hidden_size = 192;
  c.num_layers = 6;
  c.num_heads = 12;
  c.num_kv_heads = 6;
  c.head_dim = 16;
  c.intermediate_size = 384;
  c.vocab_size = 151936;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig qwen72b() {
  ModelConfig c;
  c.hidden_size = 8192;
  c.num_layers = 80;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 29568;
  c.vocab_size = 152064;
  return c;
}

std::vector<Placement> place(const ModelConfig& cfg, const Layout& l, const std::string& hosts) {
  const int n = l.world_ranks();
  std::vector<DeviceChoice> cpu(n);
  return place_ranks(model_fit(cfg), l, slots_from_host_names(parse_fake_hosts(hosts, n)), cpu);
}

Error placement_error(const ModelConfig& cfg, const Layout& l, const std::string& hosts) {
  try {
    check_placement(model_fit(cfg), l, place(cfg, l, hosts), false);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "placement accepted --tp " << l.tp << " --pp " << l.pp << " on " << hosts;
  return Error(Err::Internal, "none");
}

void expect_tp_groups_inside_hosts(const std::vector<Placement>& p, int tp) {
  for (const Placement& x : p) {
    const Placement& head = p[x.stage * tp];
    EXPECT_EQ(x.host, head.host) << "rank " << x.rank << " left its TP group's host";
    EXPECT_EQ(x.rank, x.stage * tp + x.tp_rank);
  }
}

TEST(WorldSize, StatesTheArithmeticAndALayoutThatFits) {
  EXPECT_NO_THROW(check_world_size(model_fit(qwen72b()), {2, 3, {}}, 6));
  try {
    check_world_size(model_fit(qwen72b()), {4, 2, {}}, 6);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::WorldSize);
    EXPECT_EQ(e.message(), "6 ranks cannot form --tp 4 --pp 2 (8 ranks)");
    // Any TP up to the head count runs (uneven TP), so the fix lists TP 6 first and TP 2 x PP 3.
    EXPECT_NE(e.fix().find("Use --tp 6 --pp 1 for 6 ranks"), std::string::npos) << e.fix();
    EXPECT_NE(e.fix().find("--tp 2 --pp 3"), std::string::npos) << e.fix();
    EXPECT_NE(e.fix().find("mpirun -np 8"), std::string::npos) << e.fix();
  }
  try {
    check_world_size(model_fit(tiny()), {2, 1, {}}, 7);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "7 ranks cannot form --tp 2 --pp 1 (2 ranks)");
    EXPECT_NE(e.fix().find("Use --tp 7 --pp 1 for 7 ranks"), std::string::npos) << e.fix();
  }
  try {  // a prime above both the head and the layer count: no layout at all
    check_world_size(model_fit(tiny()), {2, 1, {}}, 1009);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.fix().find("no --tp x --pp layout of 1009 ranks"), std::string::npos) << e.fix();
  }
}

TEST(Placement, TwoHostsTp3Pp2KeepsTpGroupsInsideHosts) {
  auto p = place(tiny(), {3, 2, {}}, "h1:3,h2:3");
  std::cout << mapping_table(p);
  EXPECT_TRUE(check_placement(model_fit(tiny()), {3, 2, {}}, p, false).empty());
  expect_tp_groups_inside_hosts(p, 3);
  EXPECT_EQ(p[4].host, "h2");
  EXPECT_EQ(p[4].local_rank, 1);
  EXPECT_EQ(p[4].stage, 1);
  EXPECT_EQ(p[4].tp_rank, 1);
  EXPECT_EQ(p[4].layers.begin, 3);
  EXPECT_EQ(p[4].layers.end, 6);
}

TEST(Placement, ThreeHostsTp2Pp3KeepsTpGroupsInsideHosts) {
  auto p = place(tiny(), {2, 3, {}}, "h1:2,h2:2,h3:2");
  std::cout << mapping_table(p);
  EXPECT_TRUE(check_placement(model_fit(tiny()), {2, 3, {}}, p, false).empty());
  expect_tp_groups_inside_hosts(p, 2);
}

TEST(Placement, Tp2Pp3CannotFitTwoHostsOfThree) {
  // 3 slots per host hold one pair each; the middle pair (ranks 2,3) must straddle the hosts.
  Error e = placement_error(tiny(), {2, 3, {}}, "h1:3,h2:3");
  EXPECT_EQ(e.code(), Err::TpSpansHosts);
  EXPECT_EQ(e.message(),
            "the TP group of stage 1 (world ranks 2-3) spans 2 hosts: h1 (ranks 2), h2 (ranks 3)");
  EXPECT_NE(e.fix().find("Use --tp 3 --pp 2 or --tp 1 --pp 6"), std::string::npos) << e.fix();
}

TEST(Placement, Tp6OverTwoHostsIsRejected) {
  Error e = placement_error(tiny(), {6, 1, {}}, "h1:3,h2:3");
  EXPECT_EQ(e.code(), Err::TpSpansHosts);
  EXPECT_NE(e.message().find("spans 2 hosts: h1 (ranks 0,1,2), h2 (ranks 3,4,5)"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.fix().find("--tp 3 --pp 2"), std::string::npos) << e.fix();
  EXPECT_NE(e.render().find("QM106"), std::string::npos);
}

TEST(Placement, AllowedSpanIsALoudWarning) {
  auto p = place(tiny(), {6, 1, {}}, "h1:3,h2:3");
  auto w = check_placement(model_fit(tiny()), {6, 1, {}}, p, true);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("spans 2 hosts"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("across the network"), std::string::npos) << w[0];
}

TEST(Placement, RoundRobinHostsAskForRankOrder) {
  Error e = placement_error(tiny(), {3, 2, {}}, "h1,h2,h1,h2,h1,h2");
  EXPECT_EQ(e.code(), Err::TpSpansHosts);
  EXPECT_NE(e.message().find("(2 of 2 TP groups cross hosts)"), std::string::npos) << e.message();
  EXPECT_NE(e.fix().find("--map-by slot"), std::string::npos) << e.fix();
}

TEST(Placement, ScatteredStagesOfAHostWarn) {
  auto p = place(tiny(), {2, 3, {}}, "a,a,b,b,a,a");
  auto w = check_placement(model_fit(tiny()), {2, 3, {}}, p, false);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("host a holds pipeline stages 0,2"), std::string::npos) << w[0];
}

TEST(Placement, MappingTableHasOneLinePerRank) {
  auto p = place(tiny(), {2, 1, {}}, "n1:2");
  p[1].device = "cuda:1 (GPU 5)";
  EXPECT_EQ(mapping_table(p),
            "rank  host  device          stage  tp  layers\n"
            "0     n1    cpu             0      0   0-5 (6)\n"
            "1     n1    cuda:1 (GPU 5)  0      1   0-5 (6)\n");
}

Layout dp_layout(int dp, int tp, int pp) {
  Layout l{tp, pp, {}};
  l.dp = dp;
  return l;
}

TEST(Placement, ReplicasAreReplicaMajorAndEachKeepsItsTpGroupsOnAHost) {
  const Layout l = dp_layout(2, 3, 1);
  auto p = place(tiny(), l, "h1:3,h2:3");
  std::cout << mapping_table(p);
  EXPECT_TRUE(check_placement(model_fit(tiny()), l, p, false).empty());
  for (const Placement& x : p) {
    EXPECT_EQ(x.replica, x.rank / 3);
    EXPECT_EQ(x.tp_rank, x.rank % 3);
    EXPECT_EQ(x.stage, 0);
    EXPECT_EQ(x.host, x.replica == 0 ? "h1" : "h2") << "replica " << x.replica << " left its host";
    EXPECT_EQ(x.layers.size(), 6);
  }
  EXPECT_EQ(mapping_table(p).substr(0, mapping_table(p).find('\n')),
            "rank  host  device  replica  stage  tp  layers");
}

TEST(Placement, PipelinedReplicasNumberStagesInsideEachReplica) {
  const Layout l = dp_layout(2, 1, 3);
  auto p = place(tiny(), l, "h1:6");
  EXPECT_TRUE(check_placement(model_fit(tiny()), l, p, false).empty());
  EXPECT_EQ(p[4].replica, 1);
  EXPECT_EQ(p[4].stage, 1);
  EXPECT_EQ(p[4].layers.begin, 2);
  EXPECT_EQ(p[4].layers.end, 4);
}

TEST(Placement, AReplicaTpGroupAcrossHostsIsNamedWithItsReplica) {
  // 3 + 3 slots hold --dp 3 --tp 2 only with the middle replica split over the hosts.
  Error e = placement_error(tiny(), dp_layout(3, 2, 1), "h1:3,h2:3");
  EXPECT_EQ(e.code(), Err::TpSpansHosts);
  EXPECT_EQ(e.message(),
            "the TP group of replica 1 stage 0 (world ranks 2-3) spans 2 hosts: h1 (ranks 2), "
            "h2 (ranks 3)");
}

TEST(WorldSize, CountsReplicas) {
  try {
    check_world_size(model_fit(tiny()), dp_layout(2, 3, 1), 3);
    ADD_FAILURE() << "3 ranks accepted for --dp 2 --tp 3";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::WorldSize);
    EXPECT_EQ(e.message(), "3 ranks cannot form --dp 2 --tp 3 --pp 1 (6 ranks)");
  }
  check_world_size(model_fit(tiny()), dp_layout(2, 3, 1), 6);
}

}  // namespace
}  // namespace qmpi
