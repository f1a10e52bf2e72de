// structures::harris_list: the model and stress suites in every mode and placement, crash
// campaigns in every persistent mode under every persistent placement, and the in-flight test.
#include "crash_tests.hpp"
#include "in_flight_tests.hpp"
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using namespace structures;

using every_config = all_configs<harris_list>;
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, ModelTest, every_config, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, StressTest, every_config, config_names);

using crash_configs = persistent_configs<harris_list>;
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, CrashTest, crash_configs, config_names);

using in_flight_configs = ::testing::Types<
    on<harris_list, automatic, test_hashed>, on<harris_list, traversal, test_hashed>, on<harris_list, manual, test_hashed>,
    on<harris_list, manual, flit::adjacent>, on<harris_list, manual, flit::plain>, on<harris_list, manual, flit::link_and_persist>>;
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, InFlightTest, in_flight_configs, config_names);

}  // namespace
}  // namespace structures_test
