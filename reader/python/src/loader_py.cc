// loader_py.cc: _mmpack.Loader and _mmpack.LoaderOptions, the C++ half of mmpack.Loader.
//
// Batches reach Python without a copy. Each batch's arrays (images, tokens, lengths, indices,
// caption_index, set_index) are numpy views of the C++ Batch's buffers whose numpy `base` is one
// capsule holding a heap copy of the BatchPtr (a shared_ptr). While any of the arrays, or a
// torch.from_numpy tensor made from one (it keeps the array alive), is alive, the capsule is,
// so the batch is not handed back to the loader's pool and its buffers are neither reused nor
// freed, whatever the loader does next or whether it still exists (the pool's shared state
// outlives the loader). When the last of them dies, the capsule's destructor drops the BatchPtr
// and the buffer returns to the pool. The arrays are writable: the batch belongs to the caller
// until then.
//
// The GIL is released inside every call into the C++ Loader (Next waits for the decode threads;
// Close joins them); the decode threads never touch Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "bindings.h"
#include "errors.h"

namespace py = pybind11;

namespace mm::python {
namespace {

using reader::Batch;
using reader::BatchPtr;

// A numpy view of `data` with `shape`, kept alive by `owner`. const_cast: the caller owns the
// batch while the view lives (see the file comment).
template <typename T>
py::array_t<T> View(const std::vector<T>& data, std::vector<py::ssize_t> shape,
                    const py::capsule& owner) {
  return py::array_t<T>(std::move(shape), const_cast<T*>(data.data()), owner);
}

py::dict ToDict(BatchPtr batch) {
  const Batch& b = *batch;
  auto* held = new BatchPtr(std::move(batch));
  py::capsule owner(held, [](void* p) { delete static_cast<BatchPtr*>(p); });
  const py::ssize_t B = b.size;
  py::dict d;
  d["images"] = View(b.images, {B, b.height, b.width, 3}, owner);  // [B, H, W, 3] uint8
  d["tokens"] = View(b.tokens, {B, b.max_length}, owner);          // [B, L] int32
  d["lengths"] = View(b.lengths, {B}, owner);                      // [B] int32
  d["indices"] = View(b.indices, {B}, owner);                      // [B] int64
  d["caption_index"] = View(b.caption, {B}, owner);                // [B] int32
  d["set_index"] = View(b.set_index, {B}, owner);                  // [B] int32
  py::list keys(B);
  for (py::ssize_t j = 0; j < B; ++j) keys[j] = Utf8(b.keys[j]);
  d["keys"] = std::move(keys);
  if (!b.texts.empty()) {  // a set built with --tokenizer none: caption text, no token ids
    py::list texts(B);
    for (py::ssize_t j = 0; j < B; ++j) texts[j] = Utf8(b.texts[static_cast<size_t>(j)]);
    d["texts"] = std::move(texts);
  }
  d["epoch"] = b.epoch;
  d["step"] = b.step_in_epoch;
  return d;
}

// One mm::reader::Loader. The C++ Loader wants one consumer thread; Python threads may share
// this object, so every call into it holds mu_, always taken with the GIL released (a thread
// that waits in Next() holds mu_ and needs the GIL to return: taking mu_ while holding the
// GIL could deadlock).
//
// Fork: the C++ Loader's threads exist only in the process that created it. In a forked child
// (a torch DataLoader worker) every call raises RuntimeError naming the fix at once, instead of
// waiting for ever on threads that are not there, and Close leaves the inherited loader alone
// (destroying it would join those threads).
class PyLoader {
 public:
  PyLoader(const PyShardSet& set, const reader::LoaderOptions& options)
      : loader_(ValueOrThrow(reader::Loader::Create(set.set, options))), creator_(::getpid()) {}
  ~PyLoader() { Close(); }

  // The next batch as a dict of numpy arrays, or None at the end of the epoch.
  py::object Next() {
    BatchPtr batch = ValueOrThrow(Locked([](reader::Loader& l) { return l.Next(); }));
    if (!batch) return py::none();
    return ToDict(std::move(batch));
  }

  void StartEpoch(int64_t epoch) {
    if (epoch < 0) throw py::value_error("epoch must be >= 0, not " + std::to_string(epoch));
    Locked([epoch](reader::Loader& l) { l.StartEpoch(epoch); });
  }
  std::string StateJson() {
    return Locked([](reader::Loader& l) { return l.state().ToJson(); });
  }
  void RestoreJson(const std::string& json) {
    reader::LoaderState state = ValueOrThrow(reader::LoaderState::FromJson(json));
    ThrowIfError(Locked([&state](reader::Loader& l) { return l.Restore(state); }));
  }
  int64_t ItemsPerEpoch() {
    return Locked([](reader::Loader& l) { return l.items_per_epoch(); });
  }
  std::string Notice() {
    return Locked([](reader::Loader& l) { return l.notice(); });
  }
  int64_t BatchesPerEpoch() {
    return Locked([](reader::Loader& l) { return l.batches_per_epoch(); });
  }
  int NumThreads() {
    return Locked([](reader::Loader& l) { return l.options().num_threads; });
  }

  // Stops and joins the decode threads (a thread may be finishing a batch). Idempotent.
  void Close() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    if (::getpid() != creator_) {
      (void)loader_.release();  // a fork's copy: its threads are the parent's (see above)
      return;
    }
    loader_.reset();
  }
  bool closed() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    return !loader_;
  }

 private:
  // f(loader) with the GIL released and mu_ held. Errors: ValueError once closed.
  template <typename F>
  auto Locked(F f) -> decltype(f(std::declval<reader::Loader&>())) {
    if (::getpid() != creator_) throw std::runtime_error(ForkMessage());  // RuntimeError
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    if (!loader_) throw StatusError{Status::InvalidArgument("the Loader is closed")};
    return f(*loader_);
  }

  std::string ForkMessage() const {
    return "mmpack.Loader was created in process " + std::to_string(creator_) +
           " and is used in process " + std::to_string(::getpid()) +
           " (a fork, such as a torch DataLoader worker), where its C++ decode threads do not "
           "exist: iterate the Loader in the process that created it (it decodes in threads "
           "already: no DataLoader workers needed, num_workers=0), or create it inside the "
           "worker";
  }

  std::mutex mu_;
  std::unique_ptr<reader::Loader> loader_;  // null once closed
  const pid_t creator_;                     // the process whose threads decode
};

void BindOptions(py::module_& m) {
  py::enum_<reader::CaptionMode>(m, "CaptionMode")
      .value("RANDOM", reader::CaptionMode::kRandomCaption)
      .value("ALL", reader::CaptionMode::kAllCaptions);
  py::enum_<reader::ShuffleMode>(m, "ShuffleMode")
      .value("AUTO", reader::ShuffleMode::kAuto)
      .value("GLOBAL", reader::ShuffleMode::kGlobal)
      .value("BLOCK", reader::ShuffleMode::kBlock);
  py::enum_<reader::ImageCrop>(m, "ImageCrop")
      .value("NONE", reader::ImageCrop::kNone)
      .value("CENTER", reader::ImageCrop::kCenter)
      .value("RANDOM_RESIZED", reader::ImageCrop::kRandomResized);
  py::enum_<reader::Interpolation>(m, "Interpolation")
      .value("LANCZOS", reader::Interpolation::kLanczos)
      .value("BILINEAR", reader::Interpolation::kBilinear);
  using O = reader::LoaderOptions;
  py::class_<O>(m, "LoaderOptions", "mm::reader::LoaderOptions (reader/include/mm/reader.h).")
      .def(py::init<>())
      .def_readwrite("batch_size", &O::batch_size)
      .def_readwrite("shuffle", &O::shuffle)
      .def_readwrite("shuffle_mode", &O::shuffle_mode)
      .def_readwrite("shuffle_window", &O::shuffle_window)
      .def_readwrite("seed", &O::seed)
      .def_readwrite("rank", &O::rank)
      .def_readwrite("world_size", &O::world_size)
      .def_readwrite("drop_last", &O::drop_last)
      .def_readwrite("even_batches", &O::even_batches)
      .def_readwrite("caption_mode", &O::caption_mode)
      .def_readwrite("num_threads", &O::num_threads)
      .def_readwrite("prefetch_batches", &O::prefetch_batches)
      .def_readwrite("output_height", &O::output_height)
      .def_readwrite("output_width", &O::output_width)
      .def_readwrite("crop", &O::crop)
      .def_readwrite("center_crop_ratio", &O::center_crop_ratio)
      .def_readwrite("horizontal_flip", &O::horizontal_flip)
      .def_readwrite("interpolation", &O::interpolation);
}

}  // namespace

void BindLoader(py::module_& m) {
  BindOptions(m);
  py::class_<PyLoader>(m, "Loader", "The C++ half of mmpack.Loader (see there).")
      .def(py::init<const PyShardSet&, const reader::LoaderOptions&>(), py::arg("set"),
           py::arg("options"), py::keep_alive<1, 2>())
      .def("next", &PyLoader::Next)
      .def("start_epoch", &PyLoader::StartEpoch, py::arg("epoch"))
      .def("state_json", &PyLoader::StateJson)
      .def("restore_json", &PyLoader::RestoreJson, py::arg("state"))
      .def_property_readonly("items_per_epoch", &PyLoader::ItemsPerEpoch)
      .def_property_readonly("batches_per_epoch", &PyLoader::BatchesPerEpoch)
      .def_property_readonly("notice", &PyLoader::Notice)
      .def_property_readonly("num_threads", &PyLoader::NumThreads)
      .def("close", &PyLoader::Close)
      .def_property_readonly("closed", &PyLoader::closed);
}

}  // namespace mm::python
