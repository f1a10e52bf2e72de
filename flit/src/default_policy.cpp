#include "flit/flit.hpp"

namespace flit {

bool default_backend_supported() noexcept { return default_backend::supported(); }

}  // namespace flit
