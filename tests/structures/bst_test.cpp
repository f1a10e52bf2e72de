// structures::bst: the model and stress suites in every mode and placement, crash
// campaigns in every persistent mode under two placements.
#include "crash_tests.hpp"
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using namespace structures;

using every_config = all_configs<bst>;
INSTANTIATE_TYPED_TEST_SUITE_P(Bst, ModelTest, every_config, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(Bst, StressTest, every_config, config_names);

using crash_configs = ::testing::Types<
    on<bst, automatic, test_hashed>, on<bst, automatic, flit::adjacent>,
    on<bst, traversal, test_hashed>, on<bst, traversal, flit::adjacent>,
    on<bst, manual, test_hashed>, on<bst, manual, flit::link_and_persist>>;
INSTANTIATE_TYPED_TEST_SUITE_P(Bst, CrashTest, crash_configs, config_names);

}  // namespace
}  // namespace structures_test
