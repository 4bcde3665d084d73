// shard_set_py.cc: _mmpack.ShardSet, random access to one sample (image, token ids, key,
// captions, source). The Python class mmpack.ShardSet derives from it (reader/python/mmpack).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "mm/format.h"
#include "mm/internal/set_files.h"

namespace py = pybind11;

namespace mm::python {

py::str Utf8(std::string_view s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

reader::ShardPin PinSampleShard(PyShardSet& s, int64_t i) {
  if (!s.set->remote()) return {};
  const size_t k = s.set->ShardOfSample(i);
  py::gil_scoped_release nogil;  // a pin may download the shard, or wait for cache room
  std::unique_lock<std::mutex> lock(s.kept_mu);
  if (!s.kept.empty() && s.kept_shard == k) return s.kept;
  // Another shard: let the kept one go first, so that a cache limit of one shard still works.
  s.kept = reader::ShardPin();
  lock.unlock();
  Result<reader::ShardPin> pin = s.set->PinShard(k);
  ThrowIfError(pin.status());  // StatusError: translated once pybind11 holds the GIL again
  lock.lock();
  s.kept_shard = k;
  s.kept = pin.value();
  return pin.value();
}

namespace {

// Python's index rules: -1 is the last sample; IndexError past either end.
int64_t SampleIndex(const PyShardSet& s, int64_t i) {
  const int64_t n = s.set->num_samples();
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    throw py::index_error("sample index " + std::to_string(i < 0 ? i - n : i) +
                          " out of range for a set of " + std::to_string(n) + " samples");
  }
  return i;
}

std::unique_ptr<PyShardSet> Open(const py::object& path, bool verify_checksums,
                                 const std::string& cache_dir, int64_t cache_limit) {
  std::string dir = py::module_::import("os").attr("fspath")(path).cast<std::string>();
  if (cache_limit < 0) {
    throw py::value_error("cache_limit must be >= 0 bytes (0: no limit), not " +
                          std::to_string(cache_limit));
  }
  reader::OpenOptions options;
  options.verify_checksums = verify_checksums;
  options.remote.cache_dir = cache_dir;
  options.remote.cache_limit = cache_limit;
  Result<std::shared_ptr<reader::ShardSet>> opened = Status::Internal("not opened");
  {
    py::gil_scoped_release nogil;  // HDF5 queries, checksums: milliseconds to minutes
    opened = reader::ShardSet::Open(dir, options);
  }
  auto out = std::make_unique<PyShardSet>();
  out->set = ValueOrThrow(std::move(opened));
  out->text = std::make_unique<reader::SampleText>(out->set);
  out->verify_checksums = verify_checksums;
  out->remote = options.remote;
  return out;
}

// Decodes sample i into `out` (a C-contiguous, writable uint8 [H, W, 3] array of the sample's
// stored size: ImageSize) or a new array.
py::array_t<uint8_t> Image(PyShardSet& s, int64_t i, const py::object& out) {
  i = SampleIndex(s, i);
  const reader::ShardPin pin = PinSampleShard(s, i);
  const reader::SetInfo& info = s.set->info();
  int width = 0, height = 0;
  s.set->ImageSize(i, &width, &height);
  py::array_t<uint8_t> dst;
  if (out.is_none()) {
    dst = py::array_t<uint8_t>({height, width, info.channels});
  } else {
    const bool fits = [&] {
      if (!py::isinstance<py::array_t<uint8_t>>(out)) return false;
      auto a = py::reinterpret_borrow<py::array>(out);
      return a.ndim() == 3 && a.shape(0) == height && a.shape(1) == width &&
             a.shape(2) == info.channels && (a.flags() & py::array::c_style) && a.writeable();
    }();
    if (!fits) {
      throw py::value_error("out must be a writable C-contiguous uint8 array of shape (" +
                            std::to_string(height) + ", " + std::to_string(width) + ", " +
                            std::to_string(info.channels) + ")");
    }
    dst = py::reinterpret_borrow<py::array_t<uint8_t>>(out);  // the caller's array, no copy
  }
  uint8_t* data = dst.mutable_data();
  Status status;
  {
    py::gil_scoped_release nogil;  // zstd or JPEG decode, ~0.1-1 ms
    status = s.set->ReadImage(i, data);
  }
  ThrowIfError(std::move(status));
  return dst;
}

py::list Tokens(PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  const reader::ShardPin pin = PinSampleShard(s, i);
  py::list out;
  for (int c = 0; c < s.set->NumCaptions(i); ++c) {
    mm::Span<const int32_t> ids = s.set->Tokens(i, c);
    py::array_t<int32_t> a(static_cast<py::ssize_t>(ids.size()));
    if (!ids.empty()) std::memcpy(a.mutable_data(), ids.data(), ids.size() * sizeof(int32_t));
    out.append(std::move(a));
  }
  ThrowIfError(s.set->CheckIntact(i));  // the file did not change under what was read
  return out;
}

py::list Captions(const PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  Result<std::vector<std::string>> captions = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;  // HDF5 reads (format 1 keeps text as HDF5 strings)
    captions = s.text->Captions(i);
  }
  py::list out;
  for (const std::string& c : ValueOrThrow(std::move(captions))) out.append(Utf8(c));
  return out;
}

py::str Source(const PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  Result<std::string> source = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;
    source = s.text->Source(i);
  }
  return Utf8(ValueOrThrow(std::move(source)));
}

// The kept manifest fields of sample i as {name: int | float | str} (mm/sample_text.h).
py::dict Metadata(const PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  Result<std::vector<reader::MetadataValue>> values = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;  // HDF5 reads, as for captions
    values = s.text->Metadata(i);
  }
  const std::vector<reader::MetadataValue> v = ValueOrThrow(std::move(values));
  const std::vector<std::string>& names = s.set->info().metadata_fields;
  py::dict out;
  for (size_t f = 0; f < v.size() && f < names.size(); ++f) {
    using Type = reader::MetadataValue::Type;
    switch (v[f].type) {
      case Type::kInt:
        out[py::str(names[f])] = py::int_(v[f].i);
        break;
      case Type::kUint:
        out[py::str(names[f])] = py::int_(v[f].u);
        break;
      case Type::kFloat:
        out[py::str(names[f])] = py::float_(v[f].f);
        break;
      case Type::kString:
        out[py::str(names[f])] = Utf8(v[f].s);
        break;
      default:
        out[py::str(names[f])] = py::none();
    }
  }
  return out;
}

// The text of the index.json of set `p` of sets() (the set itself, or a set of a mixture; a
// remote one through the transport of the set's options).
std::string IndexText(const PyShardSet& s, size_t p) {
  constexpr int64_t kMaxIndexBytes = int64_t{256} << 20;  // as ShardSet::Open reads it
  if (p >= s.set->sets().size()) {
    throw py::index_error("set " + std::to_string(p) + " of " +
                          std::to_string(s.set->sets().size()));
  }
  Result<std::string> text = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;
    auto files = reader::internal::SetFiles::Open(s.set->sets()[p].location, s.remote);
    text = files.ok() ? files.value()->Read(std::string(format::kIndexFile), kMaxIndexBytes)
                      : Result<std::string>(files.status());
  }
  return ValueOrThrow(std::move(text));
}

py::str Key(PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  const reader::ShardPin pin = PinSampleShard(s, i);
  py::str key = Utf8(s.set->Key(i));
  ThrowIfError(s.set->CheckIntact(i));
  return key;
}

int NumCaptionsOf(PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  const reader::ShardPin pin = PinSampleShard(s, i);
  const int n = s.set->NumCaptions(i);
  ThrowIfError(s.set->CheckIntact(i));
  return n;
}

py::dict Sample(PyShardSet& s, int64_t i) {
  i = SampleIndex(s, i);
  const reader::ShardPin pin = PinSampleShard(s, i);
  py::dict d;
  d["index"] = i;
  d["key"] = Utf8(s.set->Key(i));
  d["image"] = Image(s, i, py::none());
  d["tokens"] = Tokens(s, i);
  d["captions"] = Captions(s, i);
  d["source"] = Source(s, i);
  d["metadata"] = Metadata(s, i);
  return d;
}

}  // namespace

void BindShardSet(py::module_& m) {
  py::class_<PyShardSet>(m, "ShardSet", "The C++ half of mmpack.ShardSet (see there).")
      .def(py::init(&Open), py::arg("path"), py::kw_only(), py::arg("verify_checksums") = false,
           py::arg("cache_dir") = std::string(), py::arg("cache_limit") = int64_t{0})
      .def("__len__", [](const PyShardSet& s) { return s.set->num_samples(); })
      .def("__getitem__", &Sample, py::arg("i"))
      .def("image", &Image, py::arg("i"), py::kw_only(), py::arg("out") = py::none())
      .def(
          "image_size",
          [](PyShardSet& s, int64_t i) {
            i = SampleIndex(s, i);
            const reader::ShardPin pin = PinSampleShard(s, i);
            int w = 0, h = 0;
            s.set->ImageSize(i, &w, &h);
            return py::make_tuple(w, h);
          },
          py::arg("i"))
      .def("tokens", &Tokens, py::arg("i"))
      .def("captions", &Captions, py::arg("i"))
      .def("source", &Source, py::arg("i"))
      .def("metadata", &Metadata, py::arg("i"))
      .def_property_readonly("metadata_fields",
                             [](const PyShardSet& s) { return s.set->info().metadata_fields; })
      .def("key", &Key, py::arg("i"))
      .def("num_captions_of", &NumCaptionsOf, py::arg("i"))
      .def(
          "locate", [](const PyShardSet& s, int64_t i) { return s.set->Locate(SampleIndex(s, i)); },
          py::arg("i"))
      .def_property_readonly("root", [](const PyShardSet& s) { return s.set->info().root; })
      .def("index_text", &IndexText, py::arg("set") = size_t{0})
      .def_property_readonly("sets",
                             [](const PyShardSet& s) {
                               py::list out;
                               for (const reader::MixtureSet& m : s.set->sets()) {
                                 py::dict d;
                                 d["path"] = m.location;
                                 d["weight"] = m.weight > 0 ? py::object(py::float_(m.weight))
                                                            : py::object(py::none());
                                 d["first"] = m.first_sample;
                                 d["samples"] = m.info.num_samples;
                                 d["captions"] = m.info.num_captions;
                                 d["epoch_samples"] = m.epoch_samples;
                                 d["image_shape"] = py::make_tuple(
                                     m.info.image_height, m.info.image_width, m.info.channels);
                                 out.append(std::move(d));
                               }
                               return out;
                             })
      .def(
          "set_of",
          [](const PyShardSet& s, int64_t i) { return s.set->SetOfSample(SampleIndex(s, i)); },
          py::arg("i"))
      .def_property_readonly("cache_dir", [](const PyShardSet& s) { return s.remote.cache_dir; })
      .def_property_readonly("cache_limit",
                             [](const PyShardSet& s) { return s.remote.cache_limit; })
      .def_property_readonly("remote", [](const PyShardSet& s) { return s.set->remote(); })
      .def_property_readonly("verify_checksums",
                             [](const PyShardSet& s) { return s.verify_checksums; })
      .def_property_readonly("image_shape",
                             [](const PyShardSet& s) {
                               const reader::SetInfo& info = s.set->info();
                               return py::make_tuple(info.image_height, info.image_width,
                                                     info.channels);
                             })
      .def_property_readonly("num_captions",
                             [](const PyShardSet& s) { return s.set->info().num_captions; })
      .def_property_readonly("pad_id", [](const PyShardSet& s) { return s.set->info().pad_id; })
      .def_property_readonly("eos_id", [](const PyShardSet& s) { return s.set->info().eos_id; })
      .def_property_readonly("vocab_size",
                             [](const PyShardSet& s) { return s.set->info().vocab_size; });
}

}  // namespace mm::python
