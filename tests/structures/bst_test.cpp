// structures::bst: the shared model and stress suites in every mode and placement.
#include "structure_tests.hpp"

namespace structures_test {
namespace {

using on_model_configs = configs<structures::bst, on_model>;
using on_hardware_configs = configs<structures::bst, on_hardware>;
INSTANTIATE_TYPED_TEST_SUITE_P(Bst, ModelTest, on_model_configs, config_names);
INSTANTIATE_TYPED_TEST_SUITE_P(Bst, StressTest, on_hardware_configs, config_names);

}  // namespace
}  // namespace structures_test
