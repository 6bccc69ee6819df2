#include "ckpt/pt_builder.h"

#include "base/error.h"

namespace mds::ckpt {

io::Value PtBuilder::view(std::string_view bytes, tensor::DType dtype,
                          std::vector<std::int64_t> shape, bool requires_grad) {
  io::TensorRef t;
  t.dtype = dtype;
  t.strides = io::TensorRef::contiguous_strides(shape);
  t.shape = std::move(shape);
  t.storage_key = std::to_string(next_key_++);
  t.location = location_;
  t.requires_grad = requires_grad;
  t.storage_numel = static_cast<std::int64_t>(bytes.size() / tensor::dtype_size(dtype));
  if (bytes.size() % tensor::dtype_size(dtype) != 0 || !t.fits_in(t.storage_numel)) {
    base::fail("checkpoint writer: a tensor of ", t.numel(), " elements does not fit in ",
               bytes.size(), " bytes of ", tensor::dtype_name(dtype));
  }
  storages_[t.storage_key] = {dtype, bytes};
  return io::Value::tensor(std::move(t));
}

io::Value PtBuilder::own(std::string bytes, tensor::DType dtype, std::vector<std::int64_t> shape,
                         bool requires_grad) {
  owned_.push_back(std::move(bytes));
  return view(owned_.back(), dtype, std::move(shape), requires_grad);
}

void PtBuilder::write(const std::string& path, const io::Value& root) const {
  io::write_torch_file(path, root, storages_);
}

}  // namespace mds::ckpt
