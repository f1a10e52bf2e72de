// structures::harris_list: the shared model and stress suites in every mode and placement.
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using on_model_configs = configs<structures::harris_list, on_model>;
using on_hardware_configs = configs<structures::harris_list, on_hardware>;
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, ModelTest, on_model_configs, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(HarrisList, StressTest, on_hardware_configs, config_names);

}  // namespace
}  // namespace structures_test
