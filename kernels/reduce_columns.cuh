// Column sums over the rows of a [rows, cols] matrix for bias and LayerNorm parameter gradients,
// in a fixed order so that results are deterministic, in one launch:
//  - a kernel launched with column_shape(rows, cols, chunk_rows) calls sum_columns: block (x, y)
//    takes the 32 columns of tile x and the chunk_rows rows of chunk y (kRowChunk unless the
//    kernel asks for another size); its 8 warps' lanes each own one column
//    and sum rows warp, warp + 8, … of the chunk in order; the 8 partial sums are added in warp
//    order and stored, one per chunk and column, into the sink's partials ([kSums][chunks][cols]);
//  - the block that finishes last among a column tile's chunks (an arrival counter per tile)
//    adds the tile's chunk partials in a fixed order onto the outputs, and sets the counter back
//    to zero for the next launch on the stream.
// The row chunks spread a [8192, 768] gradient over 768 blocks: one block per column tile alone
// (24 blocks, 1024 dependent loads per thread) took 0.3 to 0.7 ms on an H100, 45% of a GPT-2
// 124M bf16 step. The sums of the chunks were a second launch until session 12: 73 launches of
// about 3.6 µs a 124M micro-batch on an H100, besides the gaps between launches.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "base/error.h"
#include "kernels/device_portable.cuh"

namespace mds::kernels::detail {

constexpr int kColumnTile = 32;
constexpr int kRowLanes = kThreads / kColumnTile;
constexpr std::int64_t kRowChunk = 256;  // rows per block; fixed, so the sums' order is too

inline unsigned column_blocks(std::int64_t cols) {
  return static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
}

// Row chunks of a column sum (at least one) with `chunk_rows` rows a chunk: the `chunks` of its
// partials, grid y of its launch (failing past the grid's limit).
inline unsigned row_chunks(std::int64_t rows, std::int64_t chunk_rows = kRowChunk) {
  constexpr std::int64_t kMaxGridY = 65535;
  const std::int64_t chunks = rows <= chunk_rows ? 1 : (rows + chunk_rows - 1) / chunk_rows;
  if (chunks > kMaxGridY) {
    base::fail("cuda: column sums over ", rows, " rows exceed the grid limit of ",
               kMaxGridY * chunk_rows);
  }
  return static_cast<unsigned>(chunks);
}

// The launch of a kernel calling sum_columns with chunks of `chunk_rows` rows (its kChunkRows):
// column_blocks(cols) × row_chunks(rows, chunk_rows) blocks of (kColumnTile, kRowLanes) threads.
inline LaunchShape column_shape(std::int64_t rows, std::int64_t cols,
                                std::int64_t chunk_rows = kRowChunk) {
  return {{column_blocks(cols), row_chunks(rows, chunk_rows)}, {kColumnTile, kRowLanes}};
}

// The outputs of a column sum: out[k][c] += the column's k-th sum; a null out[k] is skipped.
template <int kSums>
struct ColumnOutputs {
  float* out[kSums];
};

// Where the blocks of a column sum leave their work: the chunks' partials ([kSums][chunks][cols],
// partials[(k·chunks + chunk)·cols + c]), one arrival counter per column tile (gridDim.x of
// them, zero before the launch and after it) and the outputs.
template <int kSums>
struct ColumnSink {
  float* partials;
  unsigned* counters;
  ColumnOutputs<kSums> outputs;
};

// Adds every chunk's partials (partials[(k·chunks + chunk)·cols + c]) of the kTileCols columns from
// c0 onto the outputs, lane y of a column the chunks y, y + kRowLanes, … in order and the lanes in
// lane order (a fixed order, whichever block runs it). Each thread loads for every column of its
// x in the tile at once, so that a block waits for about one L2 round trip a row lane step instead
// of one per 32 columns (taken 32 at a time with a barrier between, the tail cost 5 to 11 µs a
// launch on an H100 in session 15). The partials are read past L1, which other SMs' stores do not
// update. Every thread of the block, (kColumnTile, kRowLanes) threads, calls it.
template <int kSums, int kTileCols>
__device__ void add_chunk_partials(const float* partials, std::int64_t chunks,
                                   const ColumnOutputs<kSums>& outputs, std::int64_t c0,
                                   std::int64_t cols) {
  static_assert(kTileCols % kColumnTile == 0 && kTileCols <= kThreads);
  constexpr int kTiles = kTileCols / kColumnTile;
  __shared__ float lanes[kSums][kRowLanes][kTileCols];
  float sums[kSums][kTiles] = {};
#pragma unroll 4
  for (std::int64_t j = threadIdx.y; j < chunks; j += kRowLanes) {
#pragma unroll
    for (int k = 0; k < kSums; ++k) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const std::int64_t c = c0 + t * kColumnTile + threadIdx.x;
        if (c < cols) sums[k][t] += __ldcg(partials + (k * chunks + j) * cols + c);
      }
    }
  }
  for (int k = 0; k < kSums; ++k) {
    for (int t = 0; t < kTiles; ++t)
      lanes[k][threadIdx.y][t * kColumnTile + threadIdx.x] = sums[k][t];
  }
  __syncthreads();
  const int column = threadIdx.y * kColumnTile + threadIdx.x;
  const std::int64_t c = c0 + column;
  if (column < kTileCols && c < cols) {
    for (int k = 0; k < kSums; ++k) {
      if (outputs.out[k] == nullptr) continue;
      float total = lanes[k][0][column];
      for (int y = 1; y < kRowLanes; ++y) total += lanes[k][y][column];
      outputs.out[k][c] += total;
    }
  }
}

// After a block has stored its partials of the kTileCols columns from c0: counts its arrival in
// its tile's counter, and if it is the tile's last chunk to arrive, adds every chunk's partials
// of those columns onto the outputs (add_chunk_partials), then zeroes the counter. The fences
// order the partials before the arrival that publishes them and after the arrival that finds them
// all. Every thread of the block calls it.
template <int kSums, int kTileCols>
__device__ void finish_tile_if_last(const ColumnSink<kSums>& sink, std::int64_t c0,
                                    std::int64_t cols) {
  __shared__ unsigned arrived;
  const bool leader = threadIdx.x == 0 && threadIdx.y == 0;
  __threadfence();
  __syncthreads();
  if (leader) arrived = atomicAdd(sink.counters + blockIdx.x, 1u);
  __syncthreads();
  if (arrived != gridDim.y - 1) return;  // the same for every thread of the block
  __threadfence();
  add_chunk_partials<kSums, kTileCols>(sink.partials, gridDim.y, sink.outputs, c0, cols);
  if (leader) sink.counters[blockIdx.x] = 0;
}

// The end of a block of column sums: each thread's `sums` of column c (rows threadIdx.y, + 8, …
// of the block's chunk) added in row-lane order and stored, one per chunk and column, into the
// sink's partials; then finish_tile_if_last over the block's 32 columns. Every thread of the
// block calls it.
template <int kSums>
__device__ void store_column_partials(const float (&sums)[kSums], std::int64_t c, std::int64_t cols,
                                      const ColumnSink<kSums>& sink) {
  __shared__ float partial[kSums][kRowLanes][kColumnTile];
  const std::int64_t chunk = blockIdx.y, chunks = gridDim.y;
  for (int k = 0; k < kSums; ++k) partial[k][threadIdx.y][threadIdx.x] = sums[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 0; k < kSums; ++k) {
      float total = partial[k][0][threadIdx.x];
      for (int y = 1; y < kRowLanes; ++y) total += partial[k][y][threadIdx.x];
      sink.partials[(k * chunks + chunk) * cols + c] = total;
    }
  }
  finish_tile_if_last<kSums, kColumnTile>(sink, static_cast<std::int64_t>(blockIdx.x) * kColumnTile,
                                          cols);
}

// Under column_shape: the calling thread's column c and its block's chunk of rows [first, end);
// the thread's rows are first + threadIdx.y, + kRowLanes, … below end.
struct ColumnBlock {
  std::int64_t c, first, end;
};

template <std::int64_t kChunkRows = kRowChunk>
__device__ inline ColumnBlock column_block(std::int64_t rows) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kChunkRows;
  return {static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x, first,
          first + kChunkRows < rows ? first + kChunkRows : rows};
}

// Launched with column_shape(rows, cols, kChunkRows). For each column c of the block's tile,
// `term(r, c, i, sums)` (i = r·cols + c) adds row r's kSums terms into `sums`, over the rows of the
// block's chunk; one thread stores the chunk's sums into the sink's partials, and the tile's last
// block adds them up onto the outputs.
template <int kSums, std::int64_t kChunkRows = kRowChunk, typename Term>
__device__ void sum_columns(std::int64_t rows, std::int64_t cols, Term term,
                            const ColumnSink<kSums>& sink) {
  const auto [c, first, end] = column_block<kChunkRows>(rows);
  float sums[kSums] = {};
  if (c < cols) {
    for (std::int64_t r = first + threadIdx.y; r < end; r += kRowLanes) {
      term(r, c, r * cols + c, sums);
    }
  }
  store_column_partials<kSums>(sums, c, cols, sink);
}

// ---- eight columns a thread ------------------------------------------------------------------
// Where cols % 8 == 0 and the inputs are 16-byte aligned: thread (x, y) of block (tile, chunk)
// owns columns 256·tile + 8·x … + 7, loads them 16 bytes at a time, and sums for each of them the
// rows sum_columns' thread of that column sums, in the same order; the block adds the row lanes'
// sums in the same order too. So the partials are bit for bit those of sum_columns, with an
// eighth of the loads.
constexpr int kColumnTile8 = 8 * kColumnTile;

// The launch of a kernel calling sum_columns8 with chunks of `chunk_rows` rows (its kChunkRows):
// one block per 256 columns and chunk.
inline LaunchShape column8_shape(std::int64_t rows, std::int64_t cols,
                                 std::int64_t chunk_rows = kRowChunk) {
  return {{static_cast<unsigned>((cols + kColumnTile8 - 1) / kColumnTile8),
           row_chunks(rows, chunk_rows)},
          {kColumnTile, kRowLanes}};
}

// Launched with column8_shape(rows, cols). Row r's terms come in two steps, so that a thread has
// the loads of kRowGroup rows in flight at once (more rows, more registers; with one row at a
// time a [8192, 768] sum, 96 blocks of 32 rows a thread, took 21 to 26 µs on an H100 where its
// bytes need about 8): `load(r, i)` (i = r·cols + c0, c0 the thread's first
// column) returns what row r needs from memory, then `add(r, i, loaded, sums)` adds the row's
// kSums terms of columns c0 … c0 + 7 into sums[k][0 … 7] (and may store). The rows are added in
// sum_columns' order all the same. With kChunkRows other than kRowChunk (launched with
// column8_shape(rows, cols, kChunkRows)) a block takes that many rows instead: more blocks for
// kernels with much work per row, and other bits.
template <int kSums, int kRowGroup, std::int64_t kChunkRows = kRowChunk, typename Load,
          typename Add>
__device__ void sum_columns8(std::int64_t rows, std::int64_t cols, Load load, Add add,
                             const ColumnSink<kSums>& sink) {
  __shared__ float partial[kSums][kRowLanes][8][kColumnTile];  // [sum][row lane][column][x]
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kChunkRows;
  const std::int64_t end = first + kChunkRows < rows ? first + kChunkRows : rows;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kColumnTile8 + 8 * threadIdx.x;
  float sums[kSums][8] = {};
  if (c0 < cols) {
    using Loaded = decltype(load(first, c0));
    for (std::int64_t r0 = first + threadIdx.y; r0 < end; r0 += kRowGroup * kRowLanes) {
      Loaded loaded[kRowGroup] = {};
#pragma unroll
      for (int t = 0; t < kRowGroup; ++t) {
        const std::int64_t r = r0 + t * kRowLanes;
        if (r < end) loaded[t] = load(r, r * cols + c0);
      }
#pragma unroll
      for (int t = 0; t < kRowGroup; ++t) {
        const std::int64_t r = r0 + t * kRowLanes;
        if (r < end) add(r, r * cols + c0, loaded[t], sums);
      }
    }
  }
  for (int k = 0; k < kSums; ++k) {
    for (int j = 0; j < 8; ++j) partial[k][threadIdx.y][j][threadIdx.x] = sums[k][j];
  }
  __syncthreads();
  if (threadIdx.y == 0 && c0 < cols) {
    const std::int64_t chunk = blockIdx.y, chunks = gridDim.y;
    for (int k = 0; k < kSums; ++k) {
      for (int j = 0; j < 8; ++j) {
        float total = partial[k][0][j][threadIdx.x];
        for (int y = 1; y < kRowLanes; ++y) total += partial[k][y][j][threadIdx.x];
        sink.partials[(k * chunks + chunk) * cols + c0 + j] = total;
      }
    }
  }
  finish_tile_if_last<kSums, kColumnTile8>(
      sink, static_cast<std::int64_t>(blockIdx.x) * kColumnTile8, cols);
}

// Whether sum_columns8 may serve a [rows, cols] sum over these arrays.
inline bool fits_columns8(std::int64_t cols, std::initializer_list<const void*> arrays) {
  return fits_chunks_of_8(cols, cols, nullptr, arrays);
}

}  // namespace mds::kernels::detail
