// structures::skiplist: the model and stress suites in every mode and placement, crash
// campaigns in every persistent mode under every persistent placement, and the in-flight test.
#include "crash_tests.hpp"
#include "in_flight_tests.hpp"
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using namespace structures;

using every_config = all_configs<skiplist>;
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, ModelTest, every_config, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, StressTest, every_config, config_names);

using crash_configs = persistent_configs<skiplist>;
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, CrashTest, crash_configs, config_names);

using in_flight_configs = ::testing::Types<
    on<skiplist, automatic, test_hashed>, on<skiplist, traversal, test_hashed>, on<skiplist, manual, test_hashed>,
    on<skiplist, manual, flit::adjacent>, on<skiplist, manual, flit::plain>, on<skiplist, manual, flit::link_and_persist>>;
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, InFlightTest, in_flight_configs, config_names);

}  // namespace
}  // namespace structures_test
