// Streaming decoders for the compressed inputs open_input() recognises. Each reads whole archives
// as written by the usual tools: several zstd frames, several xz streams, several gzip members
// (pigz, `cat a.gz b.gz`), and fails naming the input when the data stops early or is damaged,
// so that a cut-off download is never mistaken for a complete corpus.
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "base/error.h"
#include "io/raw_input.h"

namespace mds::io {
namespace {

// Compressed bytes are read in large pieces: fewer system calls, and every decoder runs long
// stretches between refills.
constexpr std::size_t kCompressedChunk = 1 << 20;

class ZstdSource final : public ByteSource {
 public:
  explicit ZstdSource(std::unique_ptr<RawInput> raw)
      : raw_(std::move(raw)), in_buffer_(kCompressedChunk), context_(ZSTD_createDCtx()) {
    if (context_ == nullptr) base::fail(raw_->name(), ": cannot allocate a zstd decoder");
    // Archives made with `zstd --long=31` need windows above the default 128 MiB limit.
    ZSTD_DCtx_setParameter(context_, ZSTD_d_windowLogMax,
                           ZSTD_dParam_getBounds(ZSTD_d_windowLogMax).upperBound);
  }
  ~ZstdSource() override { ZSTD_freeDCtx(context_); }
  ZstdSource(const ZstdSource&) = delete;
  ZstdSource& operator=(const ZstdSource&) = delete;

  std::size_t read(char* buffer, std::size_t size) override {
    ZSTD_outBuffer out{buffer, size, 0};
    while (out.pos == 0 && size > 0) {
      // A call that filled the output may have more decoded data waiting even with no new input.
      if (in_.pos == in_.size && !output_was_full_) {
        if (raw_eof_) {
          if (!frame_complete_) base::fail(raw_->name(), ": truncated zstd stream");
          return 0;
        }
        const std::size_t n = raw_->read(in_buffer_.data(), in_buffer_.size());
        if (n == 0) {
          raw_eof_ = true;
          continue;
        }
        in_ = ZSTD_inBuffer{in_buffer_.data(), n, 0};
      }
      const std::size_t result = ZSTD_decompressStream(context_, &out, &in_);
      if (ZSTD_isError(result)) {
        base::fail(raw_->name(), ": corrupt zstd stream (", ZSTD_getErrorName(result), ")");
      }
      frame_complete_ = result == 0;
      output_was_full_ = out.pos == out.size;
    }
    return out.pos;
  }

  std::uint64_t raw_bytes_consumed() const override { return raw_->bytes_consumed(); }

 private:
  std::unique_ptr<RawInput> raw_;
  std::vector<unsigned char> in_buffer_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  ZSTD_DCtx* context_;
  bool raw_eof_ = false;
  bool frame_complete_ = false;
  bool output_was_full_ = false;
};

class XzSource final : public ByteSource {
 public:
  explicit XzSource(std::unique_ptr<RawInput> raw)
      : raw_(std::move(raw)), in_buffer_(kCompressedChunk) {
    // LZMA_CONCATENATED: `cat a.xz b.xz` is one input, as for xz(1) itself.
    const lzma_ret ret = lzma_stream_decoder(&stream_, UINT64_MAX, LZMA_CONCATENATED);
    if (ret != LZMA_OK) base::fail(raw_->name(), ": cannot start the xz decoder");
  }
  ~XzSource() override { lzma_end(&stream_); }
  XzSource(const XzSource&) = delete;
  XzSource& operator=(const XzSource&) = delete;

  std::size_t read(char* buffer, std::size_t size) override {
    if (done_ || size == 0) return 0;
    stream_.next_out = reinterpret_cast<std::uint8_t*>(buffer);
    stream_.avail_out = size;
    while (stream_.avail_out == size) {
      if (stream_.avail_in == 0 && !raw_eof_) {
        const std::size_t n = raw_->read(in_buffer_.data(), in_buffer_.size());
        raw_eof_ = n == 0;
        stream_.next_in = in_buffer_.data();
        stream_.avail_in = n;
      }
      // With concatenated streams only LZMA_FINISH tells the decoder that no further stream
      // follows.
      const lzma_ret ret = lzma_code(&stream_, raw_eof_ ? LZMA_FINISH : LZMA_RUN);
      if (ret == LZMA_STREAM_END) {
        done_ = true;
        break;
      }
      if (ret == LZMA_BUF_ERROR) base::fail(raw_->name(), ": truncated xz stream");
      if (ret != LZMA_OK) base::fail(raw_->name(), ": corrupt xz stream (", describe(ret), ")");
    }
    return size - stream_.avail_out;
  }

  std::uint64_t raw_bytes_consumed() const override { return raw_->bytes_consumed(); }

 private:
  static const char* describe(lzma_ret ret) {
    switch (ret) {
      case LZMA_MEM_ERROR:
        return "out of memory";
      case LZMA_FORMAT_ERROR:
        return "not in the xz format";
      case LZMA_OPTIONS_ERROR:
        return "unsupported options";
      case LZMA_DATA_ERROR:
        return "data is corrupt";
      case LZMA_UNSUPPORTED_CHECK:
        return "unsupported integrity check";
      default:
        return "decoder error";
    }
  }

  std::unique_ptr<RawInput> raw_;
  std::vector<std::uint8_t> in_buffer_;
  lzma_stream stream_ = LZMA_STREAM_INIT;
  bool raw_eof_ = false;
  bool done_ = false;
};

class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(std::unique_ptr<RawInput> raw)
      : raw_(std::move(raw)), in_buffer_(kCompressedChunk) {
    // 16 + MAX_WBITS: expect the gzip wrapper, not a raw zlib stream.
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) {
      base::fail(raw_->name(), ": cannot start the gzip decoder");
    }
  }
  ~GzipSource() override { inflateEnd(&stream_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  std::size_t read(char* buffer, std::size_t size) override {
    if (done_ || size == 0) return 0;
    const uInt capacity = static_cast<uInt>(std::min<std::size_t>(size, UINT_MAX));
    stream_.next_out = reinterpret_cast<Bytef*>(buffer);
    stream_.avail_out = capacity;
    while (stream_.avail_out == capacity) {
      if (stream_.avail_in == 0) {
        const std::size_t n = raw_->read(in_buffer_.data(), in_buffer_.size());
        if (n == 0) {
          if (member_open_) base::fail(raw_->name(), ": truncated gzip stream");
          done_ = true;
          break;
        }
        stream_.next_in = in_buffer_.data();
        stream_.avail_in = static_cast<uInt>(n);
      }
      // zlib stops at the end of each member; bytes after it start the next one.
      if (!member_open_) {
        if (inflateReset(&stream_) != Z_OK) base::fail(raw_->name(), ": gzip decoder error");
        member_open_ = true;
      }
      const int ret = inflate(&stream_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        member_open_ = false;
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        base::fail(raw_->name(), ": corrupt gzip stream (",
                   stream_.msg != nullptr ? stream_.msg : "decoder error", ")");
      }
    }
    return capacity - stream_.avail_out;
  }

  std::uint64_t raw_bytes_consumed() const override { return raw_->bytes_consumed(); }

 private:
  std::unique_ptr<RawInput> raw_;
  std::vector<Bytef> in_buffer_;
  z_stream stream_{};
  bool member_open_ = false;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> make_zstd_source(std::unique_ptr<RawInput> raw) {
  return std::make_unique<ZstdSource>(std::move(raw));
}

std::unique_ptr<ByteSource> make_xz_source(std::unique_ptr<RawInput> raw) {
  return std::make_unique<XzSource>(std::move(raw));
}

std::unique_ptr<ByteSource> make_gzip_source(std::unique_ptr<RawInput> raw) {
  return std::make_unique<GzipSource>(std::move(raw));
}

}  // namespace mds::io
