// structures::skiplist: the shared model and stress suites in every mode and placement.
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using on_model_configs = configs<structures::skiplist, on_model>;
using on_hardware_configs = configs<structures::skiplist, on_hardware>;
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, ModelTest, on_model_configs, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(Skiplist, StressTest, on_hardware_configs, config_names);

}  // namespace
}  // namespace structures_test
