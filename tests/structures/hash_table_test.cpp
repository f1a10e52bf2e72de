// structures::hash_table: the model and stress suites in every mode and placement, crash
// campaigns in every persistent mode under every persistent placement.
#include "crash_tests.hpp"
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using namespace structures;

using every_config = all_configs<hash_table>;
INSTANTIATE_TYPED_TEST_SUITE_P(HashTable, ModelTest, every_config, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(HashTable, StressTest, every_config, config_names);

using crash_configs = persistent_configs<hash_table>;
INSTANTIATE_TYPED_TEST_SUITE_P(HashTable, CrashTest, crash_configs, config_names);

}  // namespace
}  // namespace structures_test
