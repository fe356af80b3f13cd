#include "lib/core/launch_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>

namespace collx {
namespace {

// Sets variables for one test and restores the environment afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* name : kAll) {
      const char* old = getenv(name);
      if (old) saved_[name] = old;
      unsetenv(name);
    }
    for (const auto& kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : kAll) unsetenv(name);
    for (const auto& kv : saved_) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }

 private:
  static constexpr const char* kAll[] = {
      "COLLX_RANK", "COLLX_WORLD_SIZE", "COLLX_LOCAL_RANK", "COLLX_LOCAL_WORLD_SIZE", "COLLX_STORE_ADDR",
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "COLLX_TIMEOUT_MS", "COLLX_TRANSPORTS"};
  std::map<std::string, std::string> saved_;
};

Status resolve_from_env(JobConfig* job) {
  collx_config_t config;
  config_defaults(&config);
  return resolve_job_config(config, /*from_env=*/true, job);
}

TEST(LaunchEnv, CollxVariablesComeFirst) {
  ScopedEnv env({{"COLLX_RANK", "2"}, {"COLLX_WORLD_SIZE", "4"}, {"COLLX_STORE_ADDR", "10.0.0.1:5000"},
                 {"RANK", "0"}, {"WORLD_SIZE", "8"}});
  JobConfig job;
  ASSERT_TRUE(resolve_from_env(&job).ok());
  EXPECT_EQ(job.rank, 2);
  EXPECT_EQ(job.world_size, 4);
  EXPECT_EQ(job.store_addr, "10.0.0.1:5000");
  EXPECT_EQ(job.source, "COLLX_*");
}

TEST(LaunchEnv, TorchrunVariablesWorkAndTheStoreTakesTheNextPort) {
  ScopedEnv env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  JobConfig job;
  ASSERT_TRUE(resolve_from_env(&job).ok());
  EXPECT_EQ(job.rank, 3);
  EXPECT_EQ(job.world_size, 8);
  EXPECT_EQ(job.local_rank, 1);
  EXPECT_EQ(job.local_size, 2);
  EXPECT_EQ(job.store_addr, "node7:29501");
  EXPECT_EQ(job.source, "torchrun");
}

TEST(LaunchEnv, SlurmAndOpenMpiVariablesWork) {
  {
    ScopedEnv env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"},
                   {"COLLX_STORE_ADDR", "h:1"}});
    JobConfig job;
    ASSERT_TRUE(resolve_from_env(&job).ok());
    EXPECT_EQ(job.rank, 5);
    EXPECT_EQ(job.world_size, 6);
    EXPECT_EQ(job.source, "slurm");
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "100"}});
    JobConfig job;
    ASSERT_TRUE(resolve_from_env(&job).ok());
    EXPECT_EQ(job.rank, 1);
    EXPECT_EQ(job.local_size, 2);
    EXPECT_EQ(job.store_addr, "[::1]:101");
    EXPECT_EQ(job.source, "openmpi");
  }
}

TEST(LaunchEnv, MissingOrBadValuesAreClearErrors) {
  {
    ScopedEnv env({});
    JobConfig job;
    Status st = resolve_from_env(&job);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("COLLX_WORLD_SIZE"), std::string::npos) << st.message();
  }
  {
    ScopedEnv env({{"COLLX_RANK", "4"}, {"COLLX_WORLD_SIZE", "4"}, {"COLLX_STORE_ADDR", "h:1"}});
    JobConfig job;
    Status st = resolve_from_env(&job);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("rank 4"), std::string::npos) << st.message();
  }
  {
    ScopedEnv env({{"COLLX_RANK", "x"}, {"COLLX_WORLD_SIZE", "4"}});
    JobConfig job;
    Status st = resolve_from_env(&job);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("COLLX_RANK='x'"), std::string::npos) << st.message();
  }
  {
    ScopedEnv env({{"COLLX_RANK", "0"}, {"COLLX_WORLD_SIZE", "2"}});
    JobConfig job;
    Status st = resolve_from_env(&job);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("COLLX_STORE_ADDR"), std::string::npos) << st.message();
  }
  {
    ScopedEnv env({{"COLLX_RANK", "0"}, {"COLLX_WORLD_SIZE", "1"}, {"COLLX_TRANSPORTS", "tcp,infiniband"}});
    JobConfig job;
    Status st = resolve_from_env(&job);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("infiniband"), std::string::npos) << st.message();
  }
}

TEST(LaunchEnv, ANegativeDeviceOtherThanMinusOneIsRefusedNamingTheField) {
  ScopedEnv env({{"COLLX_RANK", "0"}, {"COLLX_WORLD_SIZE", "1"}});
  collx_config_t config;
  config_defaults(&config);
  JobConfig job;
  config.device = -1;  // the default: the buffers' own device
  EXPECT_TRUE(resolve_job_config(config, /*from_env=*/true, &job).ok());
  config.device = 3;  // bound to device 3 (checked against the buffers at each call)
  ASSERT_TRUE(resolve_job_config(config, /*from_env=*/true, &job).ok());
  EXPECT_EQ(job.device, 3);
  config.device = -2;
  Status st = resolve_job_config(config, /*from_env=*/true, &job);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("config->device is -2"), std::string::npos) << st.message();
}

TEST(UserConfig, SmallerOlderStructsAreAcceptedAndUninitializedOnesRejected) {
  collx_config_t user;
  config_defaults(&user);
  user.rank = 1;
  user.world_size = 3;
  user.size = offsetof(collx_config_t, store_addr);  // an "older" caller knew only up to here
  collx_config_t full;
  ASSERT_TRUE(read_user_config(&user, &full).ok());
  EXPECT_EQ(full.rank, 1);
  EXPECT_EQ(full.world_size, 3);
  EXPECT_EQ(full.timeout_ms, -1);  // unknown to the caller: default
  collx_config_t garbage{};
  EXPECT_EQ(read_user_config(&garbage, &full).code(), COLLX_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace collx
