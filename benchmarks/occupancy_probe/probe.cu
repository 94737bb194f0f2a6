// Ground truth for tests/engine/test_occupancy.py: the CUDA runtime's own occupancy calculator
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor) on the GPU in hand, for kernels whose register count is pinned
// with __maxnreg__, over block sizes and dynamic shared-memory sizes. Prints one JSON object on stdout.
//
//   nvcc -O2 -arch=sm_90 -o probe probe.cu && ./probe > ../../tests/data/occupancy_driver_<gpu>.json
//
// Each kernel keeps 64 live accumulators, more than any cap below, so ptxas uses the cap (spilling the rest);
// the register count used in the comparison is whatever cudaFuncGetAttributes reports, not the cap.
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ void body(float* out, const float* in) {
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = in[threadIdx.x + i];
#pragma unroll
    for (int r = 0; r < 4; r++) {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = acc[i] * acc[(i + r + 1) % 64] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; i++) s += acc[i] * (float)i;
    out[threadIdx.x] = s;
}

#define KERNEL(N) __global__ void __maxnreg__(N) k##N(float* out, const float* in) { body(out, in); }
KERNEL(24) KERNEL(32) KERNEL(40) KERNEL(48) KERNEL(56) KERNEL(64) KERNEL(72) KERNEL(80) KERNEL(96)
KERNEL(128) KERNEL(168) KERNEL(200) KERNEL(255)

typedef void (*kfn)(float*, const float*);
static const kfn kernels[] = {k24, k32, k40, k48, k56, k64, k72, k80, k96, k128, k168, k200, k255};
static const int caps[] = {24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 255};

int main() {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    const int smem[] = {0, 1, 1024, 4096, 10000, 16384, 49152, 50000, 76800, 76801, 102400, 116736, 150000,
                        200000, 232448};
    int blocks[40], nb = 0;
    for (int b = 32; b <= 1024; b += 32) blocks[nb++] = b;
    blocks[nb++] = 1; blocks[nb++] = 33; blocks[nb++] = 100; blocks[nb++] = 1000;
    printf("{\"device\": \"%s\", \"cc\": \"%d.%d\", \"sm_count\": %d, \"max_threads_per_sm\": %d, "
           "\"regs_per_sm\": %d, \"regs_per_block\": %d, \"smem_per_sm\": %zu, \"smem_per_block_optin\": %zu, "
           "\"reserved_smem_per_block\": %zu, \"max_blocks_per_sm\": %d,\n",
           p.name, p.major, p.minor, p.multiProcessorCount, p.maxThreadsPerMultiProcessor, p.regsPerMultiprocessor,
           p.regsPerBlock, p.sharedMemPerMultiprocessor, p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock,
           p.maxBlocksPerMultiProcessor);
    printf("\"block_sizes\": [");
    for (int i = 0; i < nb; i++) printf("%s%d", i ? ", " : "", blocks[i]);
    printf("],\n\"cases\": [\n");
    int first = 1;
    for (int k = 0; k < 13; k++) {
        cudaFuncSetAttribute(kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p.sharedMemPerBlockOptin);
        cudaFuncAttributes a;
        cudaFuncGetAttributes(&a, kernels[k]);
        for (int s = 0; s < (int)(sizeof(smem) / sizeof(smem[0])); s++) {
            printf("%s{\"cap\": %d, \"regs\": %d, \"static_smem\": %zu, \"local_bytes\": %zu, "
                   "\"max_threads\": %d, \"smem\": %d, \"blocks_per_sm\": [",
                   first ? "" : ",\n", caps[k], a.numRegs, a.sharedSizeBytes, a.localSizeBytes,
                   a.maxThreadsPerBlock, smem[s]);
            first = 0;
            for (int i = 0; i < nb; i++) {
                int n = -1;
                cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernels[k], blocks[i], smem[s]);
                if (e != cudaSuccess) { n = -1; cudaGetLastError(); }
                printf("%s%d", i ? ", " : "", n);
            }
            printf("]}");
        }
    }
    printf("\n]}\n");
    return 0;
}
